import { defaultWorkerConcurrency } from '@tdp/protocol';
import { ConfigError, integer, onOff, required, truthy } from './configParsing.ts';
import { type Keyring, parseKeyring } from './core/identity/secretBox.ts';
import { type RetentionWindows, windowsProblem } from './core/retention/policy.ts';
import type { BucketPolicy } from './core/shared/tokenBuckets.ts';
import {
  defaultNotificationDelivery,
  type NotificationDeliverySettings,
  notificationDeliveryFrom,
} from './notificationSettings.ts';
import { type OrchestratorSettings, orchestratorFrom } from './orchestratorConfig.ts';

export { ConfigError } from './configParsing.ts';

/** How one background loop paces itself (see `WakeableLoop`). */
export interface LoopPacing {
  /** Rows one round takes at most; a full round runs the next one at once. */
  batchSize: number;
  /** The longest sleep between rounds, a safety net for missed wake-ups. */
  maxIdleMs: number;
  /** After a round that was not full, wait at least this long, even when woken (gathers rows). */
  batchWindowMs: number;
}

/** Timings and sizes that have a default; `configFromEnv` reads some of them from the environment. */
export interface ServerSettings {
  /** A callback POST unanswered by then fails (and is retried). */
  callbackTimeoutMs: number;
  /** How long an application's callback signing secrets are reused before they are read again. */
  callbackSecretsCacheMs: number;
  /** How often the lease loop looks for silent worker sessions. */
  leaseCheckIntervalMs: number;
  /** How often the health reconciler looks for steps whose heartbeats stopped. */
  healthCheckIntervalMs: number;
  /** Steps the health reconciler marks in one round at most. */
  healthMaxPerCycle: number;
  /** How often each replica looks whether this minute's chart sample is written (well under a minute). */
  chartSampleIntervalMs: number;
  /** Chart samples (docs/dashboard.md) older than this are deleted by the sampler. */
  chartSampleRetentionMs: number;
  /** With a durable gateway, the relay loop takes what the hand-off did not publish after this long. */
  realtimeHandoffGraceMs: number;
  /**
   * With Centrifugo: how often each replica reads the realtime rows other replicas committed, for its
   * own task streams, should no NOTIFY wake it (its own commits it reads at once).
   */
  realtimeFollowPollMs: number;
  /** A scheduling request no worker can take is tried again after this long. */
  retryUnplaceableMs: number;
  /** Age up to which task creation places steps from the last read of the workers. */
  workerCandidatesMaxAgeMs: number;
  /** How long a worker credential, once read, is reused. */
  workerCredentialsCacheMs: number;
  /** How long a worker's owner, once read, is reused. */
  workerOwnersCacheMs: number;
  /** Workers are asked to beat this many times per `workerHeartbeatTtlMs`. */
  workerHeartbeatsPerTtl: number;
  /** Attempts at once on a worker whose registration names no `maxConcurrency` (the runtime's default). */
  workerDefaultMaxConcurrency: number;
  /** Outbox NOTIFYs to other processes are sent at most this often. */
  outboxNotifyIntervalMs: number;
  /** On shutdown, database connections get this long to finish their queries. */
  shutdownDatabaseTimeoutSeconds: number;
  /** The pacing of each background loop (measured with `bench -- e2e`, see the loops). */
  loops: Record<
    'outbox' | 'scheduler' | 'timers' | 'callbacks' | 'notifications' | 'realtime' | 'schedules',
    LoopPacing
  >;
  /** Offline notifications' webhook (docs/notifications.md). */
  notificationDelivery: NotificationDeliverySettings;
  /** At most this many notifications in one page of `GET /v1/me/notifications`. */
  notificationPageLimit: number;
  /** A schedule's fire handled later than this after its time is "missed" (docs/schedules.md). */
  scheduleMisfireGraceMs: number;
  /** How many upcoming fire times a schedule's view lists. */
  scheduleListedFireTimes: number;
  /** At most this many schedules in `GET /v1/schedules`. */
  scheduleListLimit: number;
  /** A failed loop round is retried after `firstMs`, doubling up to `maxMs`. */
  loopRetry: { firstMs: number; maxMs: number };
  /** History the realtime gateway keeps per channel (`followedSize`: task and workflow channels). */
  realtimeHistory: { size: number; followedSize: number; ttlMs: number };
  /** Task details one realtime client follows at once at most (source document 002 §7). */
  taskDetailSubscriptionLimit: number;
  /**
   * Each realtime connection's send queue (source document 002 §13.3): past `pressureBytes` unsent its
   * progress messages coalesce to each task's newest; past `maxBytes` it is closed as slow (3008) and
   * cut `closeGraceMs` later if it does not read as far as the close.
   */
  realtimeClientQueue: { pressureBytes: number; maxBytes: number; closeGraceMs: number };
  /** An application's resource provider unanswered by then fails the grant (retryable). */
  resourceProviderTimeoutMs: number;
  /**
   * A replayed grant request whose stored grant has less than this left (a fraction of its lifetime, or
   * a time) is renewed, a new URL from the provider, rather than returned as it was.
   */
  grantReplayRenewal: { remainingFraction: number; remainingMs: number };
  /** The development provider's file URLs (`tdp dev`) expire after this long. */
  developmentFilesGrantTtlMs: number;
  /** The development provider accepts uploads of at most this many bytes. */
  developmentFilesMaxBytes: number;
  /** A worker command not acknowledged by then is sent again on the worker's stream. */
  commandResendAfterMs: number;
  /** How often an open command stream reads its worker's open commands (other replicas' commands). */
  commandPollIntervalMs: number;
  /** An idle server-sent-event stream gets a comment this often, so proxies keep it open. */
  sseKeepAliveMs: number;
  /** After a cancel, running attempts get this long to stop before the execution is cancelled anyway. */
  cancelGraceMs: number;
  /** An API key, once read, is trusted this long (a revocation takes effect within it). */
  apiKeyCacheMs: number;
  /** Freed worker capacity retries the steps waiting for a worker at most this often. */
  capacityRetryMinIntervalMs: number;
  /** A shutdown (SIGTERM) still unfinished after this long is abandoned: the process exits with 1. */
  shutdownDeadlineMs: number;
  /**
   * A database connection that owes an answer (to a statement, BEGIN, COMMIT or ROLLBACK) and has heard
   * nothing for this long is destroyed, never handed back to the pool. Above `statementTimeoutMs`, which
   * PostgreSQL enforces itself; this one holds when the network stops passing bytes.
   */
  databaseAnswerDeadlineMs: number;
  /** PostgreSQL ends a session idle inside a transaction for this long (`idle_in_transaction_session_timeout`). */
  databaseIdleInTransactionTimeoutMs: number;
  /** A background loop busy with one round for longer than this is stuck: `/readyz` fails, naming it. */
  loopRoundDeadlineMs: number;
  /** `/readyz` fails when the pool cannot hand out a connection and answer within this long. */
  readinessDatabaseDeadlineMs: number;
  /** After an unhandled rejection or uncaught exception, `/readyz` fails for this long. */
  processFaultUnreadyMs: number;
  /**
   * Token buckets per credential, in each process (docs/rate-limits.md): requests with an application's
   * API key or its user tokens, with a worker key, with an execution token. `perSecond: 0` is no limit.
   */
  rateLimits: Record<RateLimitedCredential, BucketPolicy>;
  /** The gRPC reporting port (docs/grpc.md): 0 is a free port (announced to workers), null is off. */
  grpcPort: number | null;
  /** Requests a gRPC report stream may have unanswered at once (its flow-control window). */
  grpcStreamWindow: number;
  /** Executions bound at once on one gRPC report stream; one more forgets the oldest. */
  grpcStreamMaxBindings: number;
  /** On shutdown, open gRPC streams get this long to end before they are cut. */
  grpcCloseGraceMs: number;
  /** Requests one round of a gRPC stream takes at most: one transaction (the worker sender's batch). */
  grpcStreamRoundSize: number;
  /** Rows one dead-letter requeue that names no ids puts back at most (the oldest first). */
  deadLetterRequeueLimit: number;
  /** Tasks one bulk cancel or retry may match at most; a broader filter is refused (nothing started). */
  bulkJobTaskLimit: number;
  /** Tasks a bulk job's loop handles per round (each in its own transaction), holding its claim. */
  bulkJobBatchSize: number;
  /** How long a replica's claim on a bulk job lasts; after it another replica resumes from the cursor. */
  bulkJobClaimMs: number;
  /** The bulk job loop looks for new or abandoned jobs at least this often. */
  bulkJobPollMs: number;
  /** What the retention sweep keeps, and how it paces itself (docs/retention.md). */
  retention: RetentionSettings;
  /** Samples one `POST /v1/telemetry/visibility` may carry (docs/observability.md). */
  visibilityReportMaxSamples: number;
  /** Visibility reports per user (a token bucket per application and user); `perSecond: 0` is no limit. */
  visibilityReportRate: BucketPolicy;
}

/** The retention windows (days, one per table) and the sweep's batch sizes and timings. */
export interface RetentionSettings extends RetentionWindows {
  /** Whether this process runs the sweep (`TDP_RETENTION_SWEEP=off` leaves it to other replicas). */
  sweep: boolean;
  /** Tasks archived in one batch at most. */
  archiveBatchTasks: number;
  /** Heap blocks (8 KiB) of each table one sweep round looks at. */
  scanBlocks: number;
  /** A batch whose files were written but whose rows were not deleted by then is taken over. */
  batchClaimMs: number;
  /** The sweep's pause once it has walked every table to its end. */
  sweepIntervalMs: number;
}

export type RateLimitedCredential = 'application' | 'worker' | 'execution';

/** The defaults of `ServerSettings`: the one place they are written. */
export const defaultSettings: ServerSettings = {
  callbackTimeoutMs: 10_000,
  callbackSecretsCacheMs: 30_000,
  leaseCheckIntervalMs: 2_000,
  healthCheckIntervalMs: 5_000,
  healthMaxPerCycle: 100,
  chartSampleIntervalMs: 15_000,
  // The day chart reads a day back; a second day spares an operator looking at yesterday a gap.
  chartSampleRetentionMs: 2 * 24 * 3600_000,
  realtimeHandoffGraceMs: 5_000,
  realtimeFollowPollMs: 1_000,
  retryUnplaceableMs: 5_000,
  workerCandidatesMaxAgeMs: 1_000,
  workerCredentialsCacheMs: 5_000,
  workerOwnersCacheMs: 10 * 60_000,
  workerHeartbeatsPerTtl: 3,
  workerDefaultMaxConcurrency: defaultWorkerConcurrency,
  outboxNotifyIntervalMs: 100,
  shutdownDatabaseTimeoutSeconds: 5,
  deadLetterRequeueLimit: 1_000,
  bulkJobTaskLimit: 10_000,
  // Small rounds: each task is its own fact transaction, and the claim is renewed between rounds.
  bulkJobBatchSize: 20,
  bulkJobClaimMs: 30_000,
  bulkJobPollMs: 1_000,
  visibilityReportMaxSamples: 50,
  // A browser reports at most every few seconds; a burst covers a reconnect's catch-up.
  visibilityReportRate: { perSecond: 0.5, burst: 5 },
  loops: {
    // After a burst (10,000 tasks are ~40,000 events) rounds of 100 kept the loop busy well into the
    // traffic that followed; 500 a round cut that tail (`bench -- e2e`: steady p99 193 → 78 ms, 1,000
    // measured the same). Up to 10 ms more commit→publish latency buys batches of many events.
    outbox: { batchSize: 500, maxIdleMs: 30_000, batchWindowMs: 10 },
    // A round locks its tasks and writes its attempts together, so a bigger round costs little more
    // than a small one; 50 measured best in `bench -- e2e` (20: −25 %, 100: −7 %).
    scheduler: { batchSize: 50, maxIdleMs: 1_000, batchWindowMs: 2 },
    timers: { batchSize: 50, maxIdleMs: 5_000, batchWindowMs: 0 },
    callbacks: { batchSize: 50, maxIdleMs: 5_000, batchWindowMs: 10 },
    notifications: { batchSize: 50, maxIdleMs: 5_000, batchWindowMs: 10 },
    realtime: { batchSize: 200, maxIdleMs: 1_000, batchWindowMs: 2 },
    // A round holds its due schedules while it creates their tasks; queued (QUEUE_ONE) fires are
    // looked at again every maxIdleMs, so that bounds how long one waits after its previous task ends.
    schedules: { batchSize: 20, maxIdleMs: 1_000, batchWindowMs: 0 },
  },
  notificationDelivery: defaultNotificationDelivery,
  notificationPageLimit: 200,
  scheduleMisfireGraceMs: 60_000,
  scheduleListedFireTimes: 5,
  scheduleListLimit: 500,
  loopRetry: { firstMs: 1_000, maxMs: 30_000 },
  realtimeHistory: { size: 300, followedSize: 100, ttlMs: 10 * 60_000 },
  taskDetailSubscriptionLimit: 20,
  // Centrifugo's client_queue_max_size (1 MiB) and write timeout (1 s).
  realtimeClientQueue: { pressureBytes: 64 * 1024, maxBytes: 1024 * 1024, closeGraceMs: 1_000 },
  resourceProviderTimeoutMs: 10_000,
  grantReplayRenewal: { remainingFraction: 0.2, remainingMs: 60_000 },
  developmentFilesGrantTtlMs: 15 * 60_000,
  developmentFilesMaxBytes: 1024 ** 3,
  commandResendAfterMs: 30_000,
  commandPollIntervalMs: 1_000,
  sseKeepAliveMs: 15_000,
  cancelGraceMs: 30_000,
  apiKeyCacheMs: 5_000,
  capacityRetryMinIntervalMs: 50,
  shutdownDeadlineMs: 30_000,
  databaseAnswerDeadlineMs: 15_000,
  databaseIdleInTransactionTimeoutMs: 60_000,
  // A callbacks round may wait out a few slow receivers (callbackTimeoutMs each); stuck is far beyond.
  loopRoundDeadlineMs: 120_000,
  readinessDatabaseDeadlineMs: 2_000,
  processFaultUnreadyMs: 30_000,
  // Far above what one process serves (`bench -- create`, `-- events`, `-- e2e` stay under ~3,000
  // requests/s per credential on a developer machine): a limit against a runaway client, not a quota.
  rateLimits: {
    application: { perSecond: 10_000, burst: 20_000 },
    worker: { perSecond: 10_000, burst: 20_000 },
    execution: { perSecond: 1_000, burst: 2_000 },
  },
  grpcPort: 0,
  // A window of a few rounds of REST's batch size (200): the stream's rounds stay large under load.
  grpcStreamWindow: 1_000,
  grpcStreamMaxBindings: 10_000,
  grpcCloseGraceMs: 5_000,
  grpcStreamRoundSize: 200,
  retention: {
    sweep: true,
    taskDays: 30,
    // Published, delivered and fired rows are done; a week leaves time to look into an incident.
    outboxDays: 7,
    realtimeDays: 7,
    callbackDays: 7,
    // Must outlive the longest retry (windowsProblem checks it; about 4 h with outbox/policy.ts).
    idempotencyDays: 30,
    consumerInboxDays: 30,
    commandDays: 7,
    timerDays: 7,
    grantDays: 7,
    bulkJobDays: 30,
    archiveBatchTasks: 50,
    // 1 MiB of heap a round and table: a short transaction even on a full page of rows.
    scanBlocks: 128,
    batchClaimMs: 10 * 60_000,
    sweepIntervalMs: 10 * 60_000,
  },
};

/** Settings, compiled once at the edge; the rest of the server sees only these values. */
/** `orchestrator` (TDP_ORCHESTRATOR) and `temporal` (TEMPORAL_*): orchestratorConfig.ts. */
export interface ServerConfig extends ServerSettings, OrchestratorSettings {
  databaseUrl: string;
  host: string;
  port: number;
  publicUrl: string;
  adminToken: string;
  secretKeyring: Keyring;
  allowInsecureCallbacks: boolean;
  natsUrl: string | null;
  /** First token of event subjects (`tdp.<tenant>.<application>.events.<type>`). */
  natsSubjectPrefix: string;
  bodyLimitBytes: number;
  requestDeadlineMs: number;
  statementTimeoutMs: number;
  databasePoolSize: number;
  /** Connections of the heartbeat pool (`leaseTables.ts` `heartbeatSession`), apart from the main pool. */
  heartbeatPoolSize: number;
  logLevel: string;
  /** Spans through the OpenTelemetry API (docs/observability.md): on when OTEL_EXPORTER_OTLP_ENDPOINT is set. */
  tracing?: boolean;
  runLoops: boolean;
  /** Lifetime of execution tokens and handles (they are also revoked when their step attempt ends). */
  executionCredentialTtlMs: number;
  heartbeatIntervalSeconds: number;
  heartbeatTimeoutSeconds: number;
  /** The health reconciler judges nobody for this long after start-up or a database outage. */
  healthGraceMs: number;
  /** A worker whose heartbeats stop for this long is not given new work. */
  workerHeartbeatTtlMs: number;
  /** The in-process gateway keeps its channels in Redis (several nodes serve them); null: in memory. */
  redisUrl: string | null;
  /** Enables the gateway's server API (`/api/<method>`, `X-API-Key`). */
  gatewayApiKey: string | null;
  /** Realtime tokens signed with RS256/ES256 by these keys are accepted too. */
  realtimeJwksUrl: string | null;
  /** Publish through this Centrifugo-compatible server API instead of the in-process gateway. */
  centrifugoApiUrl: string | null;
  centrifugoApiKey: string | null;
  /** The WebSocket URL handed out with connection tokens (default: this server's). */
  realtimeWsUrl: string | null;
  /** Realtime tokens' HMAC secret, shared with Centrifugo (checked by `realtimeTokenSecretFrom`). */
  realtimeTokenSecret?: string | null;
  /**
   * The development resource provider (src/development/): served only when set, which `tdp dev` does
   * (files under `.tdp/files`) and `tdp server` never does. `providerToken` is what TDP sends it.
   */
  developmentFiles?: { directory: string; providerToken: string } | null;
  /** Where finished tasks are archived (`TDP_ARCHIVE_DIR`); without it task history is kept. */
  archiveDirectory?: string | null;
  dashboardDirectory?: string | null; // the dashboard's pages (TDP_DASHBOARD_DIR; else @tdp/dashboard's)
}

/** An optional setting: the override if given (null included), else the trimmed variable, else null. */
function optional<K extends keyof ServerConfig>(
  overrides: Partial<ServerConfig>,
  key: K,
  value: string | undefined,
): string | null {
  if (overrides[key] !== undefined) return overrides[key] as string | null;
  return value?.trim() || null;
}

/** The settings: the override if given, else the variable (for those that have one), else the default. */
function settingsFrom(env: NodeJS.ProcessEnv, overrides: Partial<ServerConfig>): ServerSettings {
  const given = Object.entries(overrides).filter(
    ([key, value]) => key in defaultSettings && value !== undefined,
  );
  const number = (key: keyof ServerSettings, name: string): number =>
    (overrides[key] as number | undefined) ?? integer(env, name, defaultSettings[key] as number);
  return {
    ...defaultSettings,
    ...(Object.fromEntries(given) as Partial<ServerSettings>),
    callbackTimeoutMs: number('callbackTimeoutMs', 'TDP_CALLBACK_TIMEOUT_MS'),
    callbackSecretsCacheMs: number('callbackSecretsCacheMs', 'TDP_CALLBACK_SECRETS_CACHE_MS'),
    leaseCheckIntervalMs: number('leaseCheckIntervalMs', 'TDP_LEASE_CHECK_INTERVAL_MS'),
    healthCheckIntervalMs: number('healthCheckIntervalMs', 'TDP_HEALTH_CHECK_INTERVAL_MS'),
    healthMaxPerCycle: number('healthMaxPerCycle', 'TDP_HEALTH_MAX_PER_CYCLE'),
    chartSampleIntervalMs: number('chartSampleIntervalMs', 'TDP_CHART_SAMPLE_INTERVAL_MS'),
    chartSampleRetentionMs: number('chartSampleRetentionMs', 'TDP_CHART_SAMPLE_RETENTION_MS'),
    realtimeHandoffGraceMs: number('realtimeHandoffGraceMs', 'TDP_REALTIME_HANDOFF_GRACE_MS'),
    realtimeFollowPollMs: number('realtimeFollowPollMs', 'TDP_REALTIME_FOLLOW_POLL_MS'),
    retryUnplaceableMs: number('retryUnplaceableMs', 'TDP_RETRY_UNPLACEABLE_MS'),
    shutdownDeadlineMs: number('shutdownDeadlineMs', 'TDP_SHUTDOWN_DEADLINE_MS'),
    databaseAnswerDeadlineMs: number('databaseAnswerDeadlineMs', 'TDP_DATABASE_ANSWER_DEADLINE_MS'),
    databaseIdleInTransactionTimeoutMs: number(
      'databaseIdleInTransactionTimeoutMs',
      'TDP_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS',
    ),
    loopRoundDeadlineMs: number('loopRoundDeadlineMs', 'TDP_LOOP_ROUND_DEADLINE_MS'),
    readinessDatabaseDeadlineMs: number('readinessDatabaseDeadlineMs', 'TDP_READINESS_DATABASE_DEADLINE_MS'),
    processFaultUnreadyMs: number('processFaultUnreadyMs', 'TDP_PROCESS_FAULT_UNREADY_MS'),
    rateLimits: rateLimitsFrom(env, overrides.rateLimits),
    notificationDelivery:
      overrides.notificationDelivery ?? notificationDeliveryFrom(env, integer, (m) => new ConfigError(m)),
    grpcPort: overrides.grpcPort !== undefined ? overrides.grpcPort : grpcPortFrom(env),
    retention: retentionFrom(env, overrides.retention),
  };
}

/** `TDP_RETENTION_DAYS` (task history) and `TDP_RETENTION_<TABLE>_DAYS` for the other windows. */
function retentionFrom(env: NodeJS.ProcessEnv, overrides: RetentionSettings | undefined): RetentionSettings {
  const base = overrides ?? defaultSettings.retention;
  const days = (key: keyof RetentionWindows, name: string) =>
    overrides ? overrides[key] : integer(env, name, base[key]);
  const retention: RetentionSettings = {
    ...base,
    sweep: overrides ? overrides.sweep : onOff(env, 'TDP_RETENTION_SWEEP', base.sweep),
    taskDays: days('taskDays', 'TDP_RETENTION_DAYS'),
    outboxDays: days('outboxDays', 'TDP_RETENTION_OUTBOX_DAYS'),
    realtimeDays: days('realtimeDays', 'TDP_RETENTION_REALTIME_DAYS'),
    callbackDays: days('callbackDays', 'TDP_RETENTION_CALLBACK_DAYS'),
    idempotencyDays: days('idempotencyDays', 'TDP_RETENTION_IDEMPOTENCY_DAYS'),
    consumerInboxDays: days('consumerInboxDays', 'TDP_RETENTION_CONSUMER_INBOX_DAYS'),
    commandDays: days('commandDays', 'TDP_RETENTION_COMMAND_DAYS'),
    timerDays: days('timerDays', 'TDP_RETENTION_TIMER_DAYS'),
    grantDays: days('grantDays', 'TDP_RETENTION_GRANT_DAYS'),
    bulkJobDays: days('bulkJobDays', 'TDP_RETENTION_BULK_JOB_DAYS'),
  };
  const problem = windowsProblem(retention);
  if (problem) throw new ConfigError(`retention: ${problem}`);
  return retention;
}

/** `TDP_GRPC_PORT`: a port, 0 for a free one, or `off`. */
function grpcPortFrom(env: NodeJS.ProcessEnv): number | null {
  if (env.TDP_GRPC_PORT?.trim().toLowerCase() === 'off') return null;
  return integer(env, 'TDP_GRPC_PORT', defaultSettings.grpcPort ?? 0);
}

/** `TDP_RATE_LIMIT_<CREDENTIAL>_PER_SECOND` and `_BURST` for each credential, over the defaults. */
function rateLimitsFrom(
  env: NodeJS.ProcessEnv,
  overrides: ServerSettings['rateLimits'] | undefined,
): ServerSettings['rateLimits'] {
  const policy = (credential: RateLimitedCredential): BucketPolicy => {
    const given = overrides?.[credential];
    const fallback = defaultSettings.rateLimits[credential];
    const name = `TDP_RATE_LIMIT_${credential.toUpperCase()}`;
    const perSecond = given?.perSecond ?? integer(env, `${name}_PER_SECOND`, fallback.perSecond);
    const burst = given?.burst ?? integer(env, `${name}_BURST`, fallback.burst);
    if (perSecond > 0 && burst < 1) throw new ConfigError(`${name}_BURST must be at least 1`);
    return { perSecond, burst };
  };
  return { application: policy('application'), worker: policy('worker'), execution: policy('execution') };
}

/** Reads the server's settings from the environment (flags are folded into it by the CLI). */
export function configFromEnv(env: NodeJS.ProcessEnv, overrides: Partial<ServerConfig> = {}): ServerConfig {
  const port = overrides.port ?? integer(env, 'TDP_PORT', 8080);
  const host = overrides.host ?? env.TDP_HOST ?? '127.0.0.1';
  const adminToken = overrides.adminToken ?? required(env, 'TDP_ADMIN_TOKEN');
  if (adminToken.length < 16) throw new ConfigError('TDP_ADMIN_TOKEN must be at least 16 characters');
  let secretKeyring = overrides.secretKeyring;
  if (!secretKeyring) {
    try {
      secretKeyring = parseKeyring(required(env, 'TDP_SECRET_KEYS'));
    } catch (error) {
      throw new ConfigError(`TDP_SECRET_KEYS: ${(error as Error).message}`);
    }
  }
  const centrifugoApiUrl = optional(overrides, 'centrifugoApiUrl', env.CENTRIFUGO_API_URL);
  const centrifugoApiKey = optional(overrides, 'centrifugoApiKey', env.CENTRIFUGO_API_KEY);
  if (centrifugoApiUrl && !centrifugoApiKey)
    throw new ConfigError('CENTRIFUGO_API_KEY is required with CENTRIFUGO_API_URL');
  const natsUrl = overrides.natsUrl !== undefined ? overrides.natsUrl : env.NATS_URL?.trim() || null;
  const { orchestrator, temporal } = orchestratorFrom(env, overrides, natsUrl);
  return {
    ...settingsFrom(env, overrides),
    databaseUrl: overrides.databaseUrl ?? required(env, 'DATABASE_URL'),
    host,
    port,
    publicUrl:
      overrides.publicUrl ??
      env.TDP_PUBLIC_URL ??
      `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`,
    adminToken,
    secretKeyring,
    allowInsecureCallbacks: overrides.allowInsecureCallbacks ?? truthy(env.TDP_ALLOW_INSECURE_CALLBACKS),
    natsUrl,
    natsSubjectPrefix: overrides.natsSubjectPrefix ?? env.TDP_NATS_SUBJECT_PREFIX ?? 'tdp',
    orchestrator,
    temporal,
    bodyLimitBytes: overrides.bodyLimitBytes ?? integer(env, 'TDP_BODY_LIMIT_BYTES', 1024 * 1024),
    requestDeadlineMs: overrides.requestDeadlineMs ?? integer(env, 'TDP_REQUEST_DEADLINE_MS', 15_000),
    statementTimeoutMs: overrides.statementTimeoutMs ?? integer(env, 'TDP_STATEMENT_TIMEOUT_MS', 10_000),
    databasePoolSize: overrides.databasePoolSize ?? integer(env, 'TDP_DB_POOL_SIZE', 20),
    heartbeatPoolSize: overrides.heartbeatPoolSize ?? integer(env, 'TDP_DB_HEARTBEAT_POOL_SIZE', 4),
    logLevel: overrides.logLevel ?? env.TDP_LOG_LEVEL ?? 'info',
    tracing:
      overrides.tracing ??
      Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim()),
    runLoops: overrides.runLoops ?? env.TDP_RUN_LOOPS !== 'false',
    executionCredentialTtlMs:
      overrides.executionCredentialTtlMs ?? integer(env, 'TDP_EXECUTION_CREDENTIAL_TTL_MS', 6 * 3600_000),
    heartbeatIntervalSeconds:
      overrides.heartbeatIntervalSeconds ?? integer(env, 'TDP_HEARTBEAT_INTERVAL_SECONDS', 15),
    heartbeatTimeoutSeconds:
      overrides.heartbeatTimeoutSeconds ?? integer(env, 'TDP_HEARTBEAT_TIMEOUT_SECONDS', 60),
    healthGraceMs: overrides.healthGraceMs ?? integer(env, 'TDP_HEALTH_GRACE_MS', 120_000),
    workerHeartbeatTtlMs:
      overrides.workerHeartbeatTtlMs ?? integer(env, 'TDP_WORKER_HEARTBEAT_TTL_MS', 30_000),
    redisUrl: optional(overrides, 'redisUrl', env.REDIS_URL),
    gatewayApiKey: optional(overrides, 'gatewayApiKey', env.TDP_GATEWAY_API_KEY),
    realtimeJwksUrl: optional(overrides, 'realtimeJwksUrl', env.TDP_REALTIME_JWKS_URL),
    centrifugoApiUrl,
    centrifugoApiKey,
    realtimeWsUrl: optional(overrides, 'realtimeWsUrl', env.TDP_REALTIME_WS_URL),
    realtimeTokenSecret: optional(overrides, 'realtimeTokenSecret', env.TDP_REALTIME_TOKEN_SECRET),
    developmentFiles: overrides.developmentFiles ?? null,
    archiveDirectory: optional(overrides, 'archiveDirectory', env.TDP_ARCHIVE_DIR),
    dashboardDirectory: optional(overrides, 'dashboardDirectory', env.TDP_DASHBOARD_DIR),
  };
}
