/**
 * The operator dashboard: its API (`/dashboard/api`, behind a server-side session opened with the admin
 * token) and
 * its built pages (`/dashboard/`). It reads across tenants and acts through the same use cases as the
 * admin API.
 */
import { Type } from 'typebox';
import { registerDashboardRoutes } from '../../adapters/inbound/http/dashboardRoutes.ts';
import { PostgresOperatorSessionStore } from '../../adapters/outbound/postgres/operatorSessionStore.ts';
import { derivedKey } from '../../adapters/outbound/tokens/executionCredentials.ts';
import { JetStreamBridgeBacklog } from '../../adapters/temporal/bridgeBacklog.ts';
import { defineFeature } from '../../host/feature.ts';
import { setting, settingsSlice } from '../../host/settings.ts';
import { dashboardPages } from './dashboardPages.ts';

const settings = settingsSlice(
  Type.Object({
    dashboardDirectory: setting.optionalString({
      env: 'TDP_DASHBOARD_DIR',
      description: "The dashboard's built pages; unset: the installed `@tdp/dashboard`'s.",
    }),
    dashboardSessionIdleSeconds: setting.integer({
      env: 'TDP_DASHBOARD_SESSION_IDLE_SECONDS',
      default: 30 * 60,
      description: 'A dashboard session not used for this long ends (the operator logs in again).',
    }),
    dashboardSessionLifetimeSeconds: setting.integer({
      env: 'TDP_DASHBOARD_SESSION_LIFETIME_SECONDS',
      default: 8 * 3600,
      description: 'A dashboard session ends this long after its login, however busy.',
    }),
  }),
);

export const dashboardFeature = defineFeature({
  name: 'dashboard',
  settings,
  async start(host, settings) {
    // A wrong TDP_DASHBOARD_DIR stops the start rather than serving no dashboard.
    const pagesDirectory = await dashboardPages(settings.dashboardDirectory ?? null);
    const { secretKeyring } = host.settings;
    return {
      routes: async (app) => {
        const workers = host.need('workers');
        const operations = host.need('operations');
        const events = host.need('events');
        const realtime = host.need('realtime');
        const callbacks = host.need('callbacks').queue;
        const engine = host.need('engine');
        const status = host.need('status');
        registerDashboardRoutes(app, {
          reads: operations.dashboardReads,
          runs: host.need('tasks').store,
          callbacks,
          pipeline: { outbox: events.outbox.rows, realtime: realtime.rows, callbacks: callbacks.rows },
          charts: operations.chartReads,
          temporalBridge:
            engine.configured && events.nats
              ? new JetStreamBridgeBacklog(
                  () => events.nats!.manager(),
                  events.stream,
                  () => engine.connected(),
                )
              : null,
          adminToken: host.settings.adminToken,
          sessions: {
            store: new PostgresOperatorSessionStore(host.sql),
            clock: host.clock,
            policy: {
              idleTimeoutSeconds: settings.dashboardSessionIdleSeconds,
              lifetimeSeconds: settings.dashboardSessionLifetimeSeconds,
            },
            csrfKey: derivedKey(secretKeyring, secretKeyring.activeKeyId, 'dashboard-csrf'),
          },
          realtimeKey: realtime.key,
          clock: host.clock,
          tasks: status.reads,
          archived: host.need('retention').archived,
          unschedulableReasons: (taskId) => workers.workerStore.pendingReasons(taskId),
          workers: workers.registration,
          schedules: host.need('schedules'),
          approvals: status.deps,
          operatorActions: {
            workerDrain: workers.workerDrain,
            operatorActions: operations.actions,
            requeue: operations.requeue,
          },
          pagesDirectory,
          wsUrl: realtime.wsUrl,
        });
      },
    };
  },
});
