/**
 * The host: what every feature plugs into. The database pools, the clock and ids, the logger, metrics and
 * tracing, the facts kernel's store, the sealed-secrets box, readiness, the after-commit hub, the loops
 * by name, the HTTP app, and the provisions features hand one another.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createEgress, type Egress } from '@tdp/egress';
import { newId } from '@tdp/protocol';
import type { FastifyInstance } from 'fastify';
import { type Logger, pino } from 'pino';
import type { Static } from 'typebox';
import { createHttpApp } from '../adapters/inbound/http/app.ts';
import { registerHealthRoutes } from '../adapters/inbound/http/healthRoutes.ts';
import { Metrics } from '../adapters/inbound/http/metrics.ts';
import { documentRateLimits } from '../adapters/inbound/http/rateLimits.ts';
import { TaskMetrics } from '../adapters/inbound/http/taskMetrics.ts';
import { PostgresBacklogReads } from '../adapters/outbound/postgres/backlogReads.ts';
import { connectDatabase, type Sql } from '../adapters/outbound/postgres/database.ts';
import {
  DatabaseHostChoice,
  databaseHosts as parseDatabaseHosts,
} from '../adapters/outbound/postgres/databaseHosts.ts';
import { PostgresFactStore } from '../adapters/outbound/postgres/factStore.ts';
import { heartbeatSession } from '../adapters/outbound/postgres/leaseTables.ts';
import { loadMigrations, migrationsCurrent } from '../adapters/outbound/postgres/migrate.ts';
import { OpenTelemetryTracing } from '../adapters/outbound/telemetry/otelTracing.ts';
import { SecretBox } from '../core/identity/secretBox.ts';
import type { EventPublisher } from '../core/outbox/ports.ts';
import { type Clock, type IdGenerator, noTracing, systemClock, type Tracing } from '../core/shared/ports.ts';
import { AfterCommitHub } from './afterCommit.ts';
import { ServerHealth } from './health.ts';
import type { hostSettings } from './hostSettings.ts';
import { type LoopRound, WakeableLoop, type WakeableLoopOptions } from './loops/wakeableLoop.ts';
import type { Provisions } from './provisions.ts';

export const serverVersion = '0.1.0';

export type HostSettings = Static<(typeof hostSettings)['schema']>;

/** What an embedder (a test) gives instead of the defaults. */
export interface ServerDependencies {
  clock?: Clock;
  ids?: IdGenerator;
  logger?: Logger;
  /** Replaces the event publisher chosen from the settings (tests). */
  publisher?: EventPublisher;
  /**
   * Checks `/readyz` fails from its first answer, by name, with what each waits for, until the embedder
   * calls `health.release(name)`: its own setup after the server listens (`tdp dev`'s key, samples, demo).
   */
  readinessHolds?: Record<string, string>;
}

/** This process's loops by name, so a feature can wake another's (a requeue wakes the table's loop). */
export class LoopRegistry {
  private readonly byName = new Map<string, WakeableLoop>();

  add(loop: WakeableLoop): void {
    this.byName.set(loop.name, loop);
  }

  /** Wakes the loop of that name when this process runs it (another replica's finds the work when it polls). */
  wake(name: string): void {
    this.byName.get(name)?.wake();
  }
}

/** A loop as a feature declares it: its name, its pacing, its round and, if it has one, its next due time. */
export type LoopOptions = Omit<WakeableLoopOptions, 'logger' | 'now' | 'retry' | 'round' | 'nextDueAt'> & {
  /** One round, with the loop's own logger (`{ loop: name }`). */
  round(logger: Logger): Promise<LoopRound>;
  /** When the next row becomes due; without it the loop sleeps its `maxIdleMs` unless woken. */
  nextDueAt?: () => Promise<Date | null>;
};

export interface Host {
  readonly settings: HostSettings;
  readonly dependencies: ServerDependencies;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly ids: IdGenerator;
  readonly sql: Sql;
  /** The heartbeat pool: renewals never queue behind fact transactions (`leaseTables.ts`). */
  readonly heartbeatSql: Sql;
  /** The facts kernel's store: the one write path of every feature. */
  readonly facts: PostgresFactStore;
  readonly secrets: SecretBox;
  /** The egress policy of requests made on a tenant's behalf, and its connections (`@tdp/egress`). */
  readonly egress: Egress;
  readonly metrics: Metrics;
  /** Submit→start, step durations, backlogs, STALE steps and commit→visible (docs/observability.md). */
  readonly taskMetrics: TaskMetrics;
  readonly tracing: Tracing;
  readonly health: ServerHealth;
  readonly afterCommit: AfterCommitHub;
  readonly loops: LoopRegistry;
  /** A loop of this process on the host's clock, with its logger and the host's back-off after failures. */
  loop(options: LoopOptions): WakeableLoop;
  readonly app: FastifyInstance;
  /** Hands a value to the features started after this one (and to every feature's routes). */
  provide<K extends keyof Provisions>(key: K, value: Provisions[K]): void;
  /** A value an earlier feature provided; a clear error at start when none did. */
  need<K extends keyof Provisions>(key: K): Provisions[K];
  /** Answers some requests before Fastify sees them (the realtime gateway's endpoints); true if it did. */
  handleRawHttp(handler: (request: IncomingMessage, response: ServerResponse) => boolean): void;
  /** Ends the pools; the last step of a stop. */
  close(): Promise<void>;
}

function serverLogger(level: string): Logger {
  return pino({
    level,
    redact: {
      paths: ['req.headers.authorization', '*.apiKey', '*.key', '*.callbackSecret', '*.bearerToken'],
      remove: true,
    },
  });
}

export async function createHost(settings: HostSettings, dependencies: ServerDependencies): Promise<Host> {
  const logger = dependencies.logger ?? serverLogger(settings.logLevel);
  const clock = dependencies.clock ?? systemClock;
  // Both pools follow the same primary: one learns of a promotion for the other.
  const databaseHosts = new DatabaseHostChoice(parseDatabaseHosts(settings.databaseUrl));
  const pool = (name: string, maxConnections: number, session = {}) =>
    connectDatabase({
      url: settings.databaseUrl,
      hosts: databaseHosts,
      maxConnections,
      statementTimeoutMs: settings.statementTimeoutMs,
      answerDeadlineMs: settings.databaseAnswerDeadlineMs,
      idleInTransactionTimeoutMs: settings.databaseIdleInTransactionTimeoutMs,
      applicationName: name,
      ...session,
    });
  const sql = pool('tdp-server', settings.databasePoolSize);
  const heartbeatSql = pool('tdp-server-heartbeats', settings.heartbeatPoolSize, heartbeatSession);
  const latestMigration = (await loadMigrations()).at(-1)?.version ?? 0;
  const metrics = new Metrics();
  let rawHandler: ((request: IncomingMessage, response: ServerResponse) => boolean) | null = null;
  const app = await createHttpApp({
    rawHandler: (request, response) => rawHandler?.(request, response) ?? false,
    logger,
    bodyLimitBytes: settings.bodyLimitBytes,
    trustProxy: settings.trustProxy,
    jsonMaxDepth: settings.jsonMaxDepth,
    requestDeadlineMs: settings.requestDeadlineMs,
    listener: {
      headersTimeoutMs: settings.headersTimeoutMs,
      requestReadTimeoutMs: settings.requestReadTimeoutMs,
      keepAliveTimeoutMs: settings.keepAliveTimeoutMs,
      maxConnectionsPerIp: settings.maxConnectionsPerIp,
      connectionRefused: () => metrics.quotaRefused.inc({ code: 'CONNECTION_LIMIT' }),
    },
    publicUrl: settings.publicUrl,
    version: serverVersion,
  });
  metrics.instrument(app);
  documentRateLimits(app);
  const health = new ServerHealth({
    migrationsCurrent: () => migrationsCurrent(sql, latestMigration),
    databaseDeadlineMs: settings.readinessDatabaseDeadlineMs,
    databaseUnwritable: () => databaseHosts.unwritable(),
    loopRoundDeadlineMs: settings.loopRoundDeadlineMs,
    processFaultUnreadyMs: settings.processFaultUnreadyMs,
  });
  for (const [check, waitingFor] of Object.entries(dependencies.readinessHolds ?? {}))
    health.hold(check, waitingFor);
  registerHealthRoutes(app, { metrics: metrics.registry, readiness: () => health.check() });
  const provisions = new Map<string, unknown>();
  const egress = createEgress(settings.egressAllow);
  return {
    settings,
    dependencies,
    logger,
    clock,
    ids: dependencies.ids ?? { newId },
    sql,
    heartbeatSql,
    facts: new PostgresFactStore(sql, heartbeatSql, (phase, seconds) =>
      metrics.factTransaction.observe({ phase }, seconds),
    ),
    secrets: new SecretBox(settings.secretKeyring),
    egress,
    metrics,
    taskMetrics: new TaskMetrics(metrics.registry, new PostgresBacklogReads(sql), () => clock.now()),
    // With tracing off, the no-op port: no span is made and no traceparent is stored or sent.
    tracing: settings.tracing ? new OpenTelemetryTracing() : noTracing,
    health,
    afterCommit: new AfterCommitHub(),
    loops: new LoopRegistry(),
    loop: ({ round, nextDueAt, ...options }) => {
      const loopLogger = logger.child({ loop: options.name });
      return new WakeableLoop({
        ...options,
        logger: loopLogger,
        now: () => clock.now(),
        retry: settings.loopRetry,
        round: () => round(loopLogger),
        nextDueAt: nextDueAt ?? (async () => null),
      });
    },
    app,
    provide: (key, value) => {
      if (provisions.has(key)) throw new Error(`two features provide "${key}"`);
      provisions.set(key, value);
    },
    need: (key) => {
      if (!provisions.has(key)) throw new Error(`no feature started before this one provides "${key}"`);
      return provisions.get(key) as Provisions[typeof key];
    },
    handleRawHttp: (handler) => {
      rawHandler = handler;
    },
    close: async () => {
      const timeout = settings.shutdownDatabaseTimeoutSeconds;
      await Promise.all([sql.end({ timeout }), heartbeatSql.end({ timeout }), egress.close()]);
    },
  };
}
