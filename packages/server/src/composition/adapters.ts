/** The composition root, part 1: the outbound adapters (database, stores, bus, gateway, tokens). */
import type { Gateway } from '@tdp/gateway';
import { newId } from '@tdp/protocol';
import { type Logger, pino } from 'pino';
import { Metrics } from '../adapters/inbound/http/metrics.ts';
import { RateLimitedAuthenticator, RateLimits } from '../adapters/inbound/http/rateLimits.ts';
import { TaskMetrics } from '../adapters/inbound/http/taskMetrics.ts';
import { InProcessBus } from '../adapters/outbound/bus/inProcessBus.ts';
import { AjvJsonSchemaValidator } from '../adapters/outbound/jsonschema/ajvValidator.ts';
import { JetStreamPublisher } from '../adapters/outbound/nats/jetStreamPublisher.ts';
import { PostgresBacklogReads } from '../adapters/outbound/postgres/backlogReads.ts';
import { PostgresCallbackQueue } from '../adapters/outbound/postgres/callbackQueue.ts';
import { PostgresChartReads } from '../adapters/outbound/postgres/chartReads.ts';
import { PostgresDashboardReads } from '../adapters/outbound/postgres/dashboardReads.ts';
import { connectDatabase } from '../adapters/outbound/postgres/database.ts';
import { PostgresDefinitionStore } from '../adapters/outbound/postgres/definitionStore.ts';
import { PostgresDetailLeases } from '../adapters/outbound/postgres/detailLeaseStore.ts';
import { PostgresFactStore } from '../adapters/outbound/postgres/factStore.ts';
import { PostgresIdentityStore } from '../adapters/outbound/postgres/identityStore.ts';
import { heartbeatSession } from '../adapters/outbound/postgres/leaseTables.ts';
import { loadMigrations, migrationsCurrent } from '../adapters/outbound/postgres/migrate.ts';
import { PostgresNotificationStore } from '../adapters/outbound/postgres/notificationStore.ts';
import { PostgresOutboxQueue } from '../adapters/outbound/postgres/outboxQueue.ts';
import { PostgresRealtimeOutbox } from '../adapters/outbound/postgres/realtimeOutbox.ts';
import { PostgresRegistryStore } from '../adapters/outbound/postgres/registryStore.ts';
import { PostgresRetentionStore } from '../adapters/outbound/postgres/retentionStore.ts';
import { PostgresStatusReads } from '../adapters/outbound/postgres/statusReads.ts';
import { PostgresStreamSessions } from '../adapters/outbound/postgres/streamSessionStore.ts';
import { PostgresTaskStore } from '../adapters/outbound/postgres/taskStore.ts';
import { PostgresWorkerStore } from '../adapters/outbound/postgres/workerStore.ts';
import { CentrifugoPresence } from '../adapters/outbound/realtime/centrifugoPresence.ts';
import { OpenTelemetryTracing } from '../adapters/outbound/telemetry/otelTracing.ts';
import { JoseUserTokens } from '../adapters/outbound/tokens/userTokens.ts';
import type { ServerConfig } from '../config.ts';
import { SecretBox } from '../core/identity/secretBox.ts';
import { realtimeClaimPolicy } from '../core/outbox/policy.ts';
import type { EventPublisher } from '../core/outbox/ports.ts';
import { type Clock, type IdGenerator, noTracing, systemClock, type Tracing } from '../core/shared/ports.ts';
import { createGateway, realtimeTokenKey } from '../realtimeGateway.ts';
import { OutboxWakeup, outboxChannel } from '../wiring/outboxWakeup.ts';
import { publishesElsewhere } from '../wiring/realtimeDelivery.ts';
import { ServerHealth } from '../wiring/serverHealth.ts';

export interface ServerDependencies {
  clock?: Clock;
  ids?: IdGenerator;
  logger?: Logger;
  /** Replaces the event publisher chosen from the config (tests). */
  publisher?: EventPublisher;
}

export type Adapters = Awaited<ReturnType<typeof connectAdapters>>;

function serverLogger(config: ServerConfig): Logger {
  return pino({
    level: config.logLevel,
    redact: {
      paths: ['req.headers.authorization', '*.apiKey', '*.key', '*.callbackSecret', '*.bearerToken'],
      remove: true,
    },
  });
}

/** The JetStream stream of a subject prefix: `TDP_EVENTS` for `tdp`. */
export const natsStream = (prefix: string) =>
  prefix === 'tdp' ? 'TDP_EVENTS' : `${prefix.toUpperCase()}_EVENTS`;

export async function connectAdapters(config: ServerConfig, overrides: ServerDependencies) {
  const logger = overrides.logger ?? serverLogger(config);
  const clock = overrides.clock ?? systemClock;
  const ids = overrides.ids ?? { newId };
  const sql = connectDatabase({
    url: config.databaseUrl,
    maxConnections: config.databasePoolSize,
    statementTimeoutMs: config.statementTimeoutMs,
    answerDeadlineMs: config.databaseAnswerDeadlineMs,
    idleInTransactionTimeoutMs: config.databaseIdleInTransactionTimeoutMs,
    applicationName: 'tdp-server',
  });
  const heartbeatSql = connectDatabase({
    url: config.databaseUrl,
    maxConnections: config.heartbeatPoolSize,
    statementTimeoutMs: config.statementTimeoutMs,
    answerDeadlineMs: config.databaseAnswerDeadlineMs,
    idleInTransactionTimeoutMs: config.databaseIdleInTransactionTimeoutMs,
    applicationName: 'tdp-server-heartbeats',
    ...heartbeatSession,
  });
  const migrations = await loadMigrations();
  const health = new ServerHealth({
    migrationsCurrent: () => migrationsCurrent(sql, migrations.at(-1)?.version ?? 0),
    databaseDeadlineMs: config.readinessDatabaseDeadlineMs,
    loopRoundDeadlineMs: config.loopRoundDeadlineMs,
    processFaultUnreadyMs: config.processFaultUnreadyMs,
  });
  const identityStore = new PostgresIdentityStore(sql);
  const outboxQueue = new PostgresOutboxQueue(sql);
  // Domain events go to NATS, or to a publisher the embedder gives; with neither, none are written.
  const signal = new OutboxWakeup(
    () => sql.notify(outboxChannel, ''),
    Boolean(overrides.publisher || config.natsUrl),
    config.outboxNotifyIntervalMs,
  );
  const nats =
    overrides.publisher || !config.natsUrl
      ? null
      : await JetStreamPublisher.connect({
          url: config.natsUrl,
          subjectPrefix: config.natsSubjectPrefix,
          stream: natsStream(config.natsSubjectPrefix),
        });
  // Without a bus nothing reaches the outbox loop; the in-process bus is its idle stand-in.
  const publisher: EventPublisher = overrides.publisher ?? nats ?? new InProcessBus();
  const realtimeRows = new PostgresRealtimeOutbox(sql, realtimeClaimPolicy);
  const metrics = new Metrics();
  // Submit→start, step durations, backlogs, STALE steps and commit→visible (docs/observability.md).
  const taskMetrics = new TaskMetrics(metrics.registry, new PostgresBacklogReads(sql), () => clock.now());
  const rateLimits = new RateLimits(clock, config.rateLimits, metrics.rateLimited, logger);
  // The realtime gateway runs in this process; its tokens are signed with the shared secret when one is
  // set (Centrifugo checks them with it too), else with a key derived from the keyring.
  const realtimeKey = realtimeTokenKey(config.secretKeyring, config.realtimeTokenSecret ?? null);
  const gateway: Gateway = createGateway(
    config,
    realtimeKey,
    () => clock.now().getTime(),
    {},
    {
      coalesced: () => metrics.realtimeSlowCoalesced.inc(),
      slowDisconnect: () => metrics.realtimeSlowDisconnects.inc(),
    },
  );
  await gateway.ready;
  // With tracing off, the no-op port: no span is made and no traceparent is stored or sent.
  const tracing: Tracing = config.tracing ? new OpenTelemetryTracing() : noTracing;
  return {
    logger,
    tracing,
    clock,
    ids,
    sql,
    heartbeatSql,
    latestMigration: migrations.at(-1)?.version ?? 0,
    /** What /readyz answers (the loops are added once they exist). */
    health,
    identityStore,
    secrets: new SecretBox(config.secretKeyring),
    rateLimits,
    // Every request with an API key is charged to its application here, whichever route takes it.
    authenticator: new RateLimitedAuthenticator(identityStore, clock, config.apiKeyCacheMs, rateLimits),
    schemas: new AjvJsonSchemaValidator(),
    definitionStore: new PostgresDefinitionStore(sql),
    tasks: new PostgresTaskStore(sql),
    statusStore: new PostgresFactStore(sql, heartbeatSql, (phase, seconds) =>
      metrics.factTransaction.observe({ phase }, seconds),
    ),
    registryStore: new PostgresRegistryStore(sql),
    workerStore: new PostgresWorkerStore(sql),
    callbackQueue: new PostgresCallbackQueue(sql),
    notificationStore: new PostgresNotificationStore(sql),
    statusReads: new PostgresStatusReads(sql),
    dashboardReads: new PostgresDashboardReads(sql),
    retentionStore: new PostgresRetentionStore(sql),
    chartReads: new PostgresChartReads(sql),
    userTokens: new JoseUserTokens(config.secretKeyring),
    outboxQueue,
    realtimeRows,
    signal,
    nats,
    publisher,
    metrics,
    taskMetrics,
    realtimeKey,
    gateway,
    // With Centrifugo, the detail limit is kept by leases every replica shares (the gateway's count
    // covers only connections to this process).
    detailLeases:
      config.centrifugoApiUrl && config.centrifugoApiKey
        ? {
            leases: new PostgresDetailLeases(sql),
            presence: new CentrifugoPresence(config.centrifugoApiUrl, config.centrifugoApiKey),
          }
        : null,
    // …and the task streams are known to every replica, so a watch-set PUT may reach any of them.
    streamSessions: publishesElsewhere(config) ? new PostgresStreamSessions(sql) : null,
  };
}
