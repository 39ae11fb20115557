/**
 * Status: the one event service every producer reports through (workers over REST or gRPC, steps an
 * application runs itself), signals and approvals, the status reads, and the health reconciler that
 * marks steps whose heartbeats stopped.
 */
import { Type } from 'typebox';
import { registerOperatorApprovalRoutes } from '../../adapters/inbound/http/approvalRoutes.ts';
import { registerSignalRoutes } from '../../adapters/inbound/http/signalRoutes.ts';
import { registerStatusRoutes } from '../../adapters/inbound/http/statusRoutes.ts';
import { PostgresStatusReads } from '../../adapters/outbound/postgres/statusReads.ts';
import { JoseExecutionCredentials } from '../../adapters/outbound/tokens/executionCredentials.ts';
import type { StatusDeps } from '../../core/status/deps.ts';
import { HealthReconciler } from '../../core/status/healthReconciler.ts';
import { defineFeature } from '../../host/feature.ts';
import { setting, settingsSlice } from '../../host/settings.ts';

export interface Status {
  deps: StatusDeps;
  reads: PostgresStatusReads;
}

declare module '../../host/provisions.ts' {
  interface Provisions {
    status: Status;
  }
}

const settings = settingsSlice(
  Type.Object({
    executionCredentialTtlMs: setting.integer({
      env: 'TDP_EXECUTION_CREDENTIAL_TTL_MS',
      default: 6 * 3600_000,
      description:
        'Lifetime of execution tokens and handles (they are also revoked when their step attempt ends).',
    }),
    heartbeatIntervalSeconds: setting.integer({
      env: 'TDP_HEARTBEAT_INTERVAL_SECONDS',
      default: 15,
      description: 'How often a running step beats, unless its definition says otherwise.',
    }),
    heartbeatTimeoutSeconds: setting.integer({
      env: 'TDP_HEARTBEAT_TIMEOUT_SECONDS',
      default: 60,
      description: 'A running step silent for this long is STALE, unless its definition says otherwise.',
    }),
    healthGraceMs: setting.integer({
      env: 'TDP_HEALTH_GRACE_MS',
      default: 120_000,
      description: 'The health reconciler judges nobody for this long after start-up or a database outage.',
    }),
    healthCheckIntervalMs: setting.integer({
      env: 'TDP_HEALTH_CHECK_INTERVAL_MS',
      default: 5_000,
      description: 'How often the health reconciler looks for steps whose heartbeats stopped.',
    }),
    mapItemsPerStep: setting.integer({
      env: 'TDP_MAP_ITEMS_PER_STEP',
      default: 10_000,
      description:
        'Items one map step may run over; more is refused at create (a list from the input) or fails the step with `MAP_ITEMS_LIMIT` (`0`: no limit).',
    }),
    mapItemsPerTask: setting.integer({
      env: 'TDP_MAP_ITEMS_PER_TASK',
      default: 50_000,
      description:
        "Items a task's map steps may run over together, checked as `TDP_MAP_ITEMS_PER_STEP` (`0`: no limit).",
    }),
    healthMaxPerCycle: setting.integer({
      env: 'TDP_HEALTH_MAX_PER_CYCLE',
      default: 100,
      description: 'Steps the health reconciler marks in one round at most.',
    }),
  }),
);

export const statusFeature = defineFeature({
  name: 'status',
  settings,
  start(host, settings) {
    const { registries, schemas } = host.need('definitions');
    const deps: StatusDeps = {
      store: host.facts,
      clock: host.clock,
      ids: host.ids,
      signal: host.afterCommit,
      registries,
      schemas,
      credentials: new JoseExecutionCredentials(host.settings.secretKeyring),
      secrets: host.secrets,
      credentialTtlMs: settings.executionCredentialTtlMs,
      defaultHeartbeatIntervalSeconds: settings.heartbeatIntervalSeconds,
      defaultHeartbeatTimeoutSeconds: settings.heartbeatTimeoutSeconds,
      // The consequences of every fact are written with these deps: the map step's limits live here.
      mapItemLimits: { perStep: settings.mapItemsPerStep, perTask: settings.mapItemsPerTask },
      quotaRefused: (code) => host.metrics.quotaRefused.inc({ code }),
      tracing: host.tracing,
      observer: host.taskMetrics,
    };
    const reads = new PostgresStatusReads(host.sql);
    host.provide('status', { deps, reads });
    const reconciler = new HealthReconciler(deps, {
      graceMs: settings.healthGraceMs,
      maxPerCycle: settings.healthMaxPerCycle,
    });
    // Every `healthCheckIntervalMs`; a failed round restarts the reconciler's grace period.
    const healthLoop = () =>
      host.loop({
        name: 'health',
        maxIdleMs: settings.healthCheckIntervalMs,
        round: async (logger) => {
          try {
            const marked = await reconciler.reconcile();
            if (marked > 0) logger.info({ marked }, 'steps marked STALE');
            return { full: false };
          } catch (error) {
            reconciler.databaseFailed();
            throw error;
          }
        },
      });
    return {
      loops: host.settings.runLoops ? [healthLoop()] : [],
      routes: async (app) => {
        const identity = host.need('identity');
        const { gate, taskTenant } = host.need('operators');
        registerOperatorApprovalRoutes(app, { gate, taskTenant, approvals: deps });
        registerStatusRoutes(app, {
          authenticator: identity.authenticator,
          status: deps,
          reads: {
            reads,
            clock: host.clock,
            ids: host.ids,
            archived: host.need('retention').archived,
            revocations: identity.revocations,
          },
          userTokens: identity.userTokens,
          rateLimits: identity.rateLimits,
        });
        registerSignalRoutes(app, {
          authenticator: identity.authenticator,
          gate,
          taskTenant,
          signals: deps,
        });
      },
    };
  },
});
