/**
 * The composition root: the only module that knows every concrete class. It turns a config into a
 * running server (HTTP API + background loops) and gives back a handle that shuts it all down in order.
 */
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Gateway } from '@tdp/gateway';
import { newId } from '@tdp/protocol';
import type { FastifyInstance } from 'fastify';
import { type Logger, pino } from 'pino';
import { registerAdminRoutes } from './adapters/inbound/http/adminRoutes.ts';
import { createHttpApp } from './adapters/inbound/http/app.ts';
import { registerDashboardRoutes } from './adapters/inbound/http/dashboardRoutes.ts';
import { registerDefinitionRoutes } from './adapters/inbound/http/definitionsRoutes.ts';
import { registerHealthRoutes } from './adapters/inbound/http/healthRoutes.ts';
import { Metrics } from './adapters/inbound/http/metrics.ts';
import { registerRealtimeRoutes } from './adapters/inbound/http/realtimeRoutes.ts';
import { registerRunRoutes } from './adapters/inbound/http/runRoutes.ts';
import { registerStatusRoutes } from './adapters/inbound/http/statusRoutes.ts';
import { registerTaskStreamRoutes } from './adapters/inbound/http/taskStreamRoutes.ts';
import { registerTaskRoutes } from './adapters/inbound/http/tasksRoutes.ts';
import { listWorkerViews, registerWorkerRoutes } from './adapters/inbound/http/workerRoutes.ts';
import { InProcessBus } from './adapters/outbound/bus/inProcessBus.ts';
import { httpResourceProvider } from './adapters/outbound/http/resourceProvider.ts';
import { AjvJsonSchemaValidator } from './adapters/outbound/jsonschema/ajvValidator.ts';
import { JetStreamPublisher } from './adapters/outbound/nats/jetStreamPublisher.ts';
import { PostgresCallbackQueue } from './adapters/outbound/postgres/callbackQueue.ts';
import { PostgresDashboardReads } from './adapters/outbound/postgres/dashboardReads.ts';
import { connectDatabase, type Sql } from './adapters/outbound/postgres/database.ts';
import { PostgresDefinitionStore } from './adapters/outbound/postgres/definitionStore.ts';
import { PostgresFactStore } from './adapters/outbound/postgres/factStore.ts';
import { PostgresGrantStore } from './adapters/outbound/postgres/grantStore.ts';
import { PostgresIdentityStore } from './adapters/outbound/postgres/identityStore.ts';
import { loadMigrations, migrationsCurrent } from './adapters/outbound/postgres/migrate.ts';
import { ClaimableRows, PostgresOutboxQueue } from './adapters/outbound/postgres/outboxQueue.ts';
import { PostgresRegistryStore } from './adapters/outbound/postgres/registryStore.ts';
import { PostgresStatusReads } from './adapters/outbound/postgres/statusReads.ts';
import { PostgresTaskStore } from './adapters/outbound/postgres/taskStore.ts';
import { PostgresWorkerStore } from './adapters/outbound/postgres/workerStore.ts';
import { CentrifugoApiPublisher, gatewayPublisher } from './adapters/outbound/realtime/publishers.ts';
import { derivedKey, JoseExecutionCredentials } from './adapters/outbound/tokens/executionCredentials.ts';
import { JoseUserTokens } from './adapters/outbound/tokens/userTokens.ts';
import type { ServerConfig } from './config.ts';
import { DefinitionCatalog } from './core/definitions/catalog.ts';
import type { CommittedWork, OutboxSignal, RealtimeHandoffMode } from './core/facts/ports.ts';
import type { GrantDeps } from './core/grants/grants.ts';
import type { ApplicationDeps } from './core/identity/applications.ts';
import { openApplicationSecrets } from './core/identity/applications.ts';
import { ApiKeyAuthenticator } from './core/identity/authenticate.ts';
import { SecretBox } from './core/identity/secretBox.ts';
import { realtimeClaimPolicy } from './core/outbox/policy.ts';
import type { EventPublisher } from './core/outbox/ports.ts';
import { RealtimeHandoff } from './core/realtime/handoff.ts';
import { CandidateSnapshot } from './core/scheduling/candidateSnapshot.ts';
import type { DispatchDeps } from './core/scheduling/dispatch.ts';
import { CommandHub, type WorkerDeps } from './core/scheduling/workers.ts';
import { type Clock, type IdGenerator, systemClock } from './core/shared/ports.ts';
import { TtlCache } from './core/shared/ttlCache.ts';
import type { StatusDeps } from './core/status/deps.ts';
import { HealthReconciler } from './core/status/healthReconciler.ts';
import { RegistryCatalog } from './core/status/registries.ts';
import { createHealthLoop } from './loops/healthLoop.ts';
import { createOutboxLoop } from './loops/outboxLoop.ts';
import {
  createCallbackLoop,
  createLeaseLoop,
  createRealtimeLoop,
  createSchedulerLoop,
  createTimerLoop,
} from './loops/runLoops.ts';
import type { WakeableLoop } from './loops/wakeableLoop.ts';
import { createGateway, realtimeTokenKey } from './realtimeGateway.ts';

export { connectDatabase } from './adapters/outbound/postgres/database.ts';
export { migrate } from './adapters/outbound/postgres/migrate.ts';
export { ConfigError, configFromEnv, type ServerConfig } from './config.ts';

export const serverVersion = '0.1.0';
const outboxChannel = 'tdp_outbox';

export interface RunningServer {
  app: FastifyInstance;
  sql: Sql;
  url: string;
  identity: ApplicationDeps;
  /** The status service's dependencies (tests drive the health reconciler with them). */
  status: StatusDeps;
  logger: Logger;
  /** The realtime gateway serving this process's WebSocket, SSE and server API endpoints. */
  gateway: Gateway;
  /** Stops accepting, lets in-flight requests and loop rounds finish, then closes connections. */
  close(): Promise<void>;
}

export interface ServerDependencies {
  clock?: Clock;
  ids?: IdGenerator;
  logger?: Logger;
  /** Replaces the event publisher chosen from the config (tests). */
  publisher?: EventPublisher;
}

/**
 * After a commit, wakes the local loops that have new rows and, for outbox rows, at most every 100 ms
 * sends a NOTIFY so outbox loops in other processes hear about them. The NOTIFY is sent outside the
 * writing transaction (a NOTIFY inside every commit would serialise commits).
 */
class OutboxWakeup implements OutboxSignal {
  private notifyPending = false;
  loops: Partial<Record<'outbox' | 'realtime' | 'scheduler' | 'timers' | 'callbacks', WakeableLoop>> = {};
  /** Set when the loops run: projections are published right after their commit. */
  handoff: RealtimeHandoff | null = null;
  realtimeHandoff: RealtimeHandoffMode | undefined = undefined;

  constructor(
    private readonly sql: Sql,
    readonly domainEvents: boolean,
  ) {}

  committed(work: CommittedWork): void {
    if (work.scheduling) this.loops.scheduler?.wake();
    if (work.callbacks) this.loops.callbacks?.wake();
    if (work.earliestTimer) this.loops.timers?.wakeBy(work.earliestTimer);
    if (this.handoff && work.realtime.length > 0) this.handoff.take(work.realtime);
    if (!work.outbox) return;
    this.loops.outbox?.wake();
    // With the hand-off, the relay's loop only sweeps up what it failed to publish (it polls).
    if (!this.handoff) this.loops.realtime?.wake();
    if (this.notifyPending) return;
    this.notifyPending = true;
    setTimeout(() => {
      this.notifyPending = false;
      this.sql.notify(outboxChannel, '').catch(() => {});
    }, 100).unref();
  }
}

export async function startServer(
  config: ServerConfig,
  overrides: ServerDependencies = {},
): Promise<RunningServer> {
  const logger =
    overrides.logger ??
    pino({
      level: config.logLevel,
      redact: {
        paths: ['req.headers.authorization', '*.apiKey', '*.key', '*.callbackSecret', '*.bearerToken'],
        remove: true,
      },
    });
  const clock = overrides.clock ?? systemClock;
  const ids = overrides.ids ?? { newId };
  const sql = connectDatabase({
    url: config.databaseUrl,
    maxConnections: config.databasePoolSize,
    statementTimeoutMs: config.statementTimeoutMs,
    applicationName: 'tdp-server',
  });

  const migrations = await loadMigrations();
  const latestMigration = migrations.at(-1)?.version ?? 0;
  const identityStore = new PostgresIdentityStore(sql);
  const secrets = new SecretBox(config.secretKeyring);
  const authenticator = new ApiKeyAuthenticator(identityStore, clock);
  const schemas = new AjvJsonSchemaValidator();
  const definitionStore = new PostgresDefinitionStore(sql);
  const tasks = new PostgresTaskStore(sql);
  const statusStore = new PostgresFactStore(sql);
  const outboxQueue = new PostgresOutboxQueue(sql);
  // Domain events go to NATS, or to a publisher the embedder gives; with neither, none are written.
  const signal = new OutboxWakeup(sql, Boolean(overrides.publisher || config.natsUrl));
  const nats =
    overrides.publisher || !config.natsUrl
      ? null
      : await JetStreamPublisher.connect({
          url: config.natsUrl,
          subjectPrefix: config.natsSubjectPrefix,
          stream:
            config.natsSubjectPrefix === 'tdp'
              ? 'TDP_EVENTS'
              : `${config.natsSubjectPrefix.toUpperCase()}_EVENTS`,
        });
  // Without a bus nothing reaches the outbox loop; the in-process bus is its idle stand-in.
  const publisher: EventPublisher = overrides.publisher ?? nats ?? new InProcessBus();
  const realtimeRows = new ClaimableRows(sql, 'realtime_outbox', realtimeClaimPolicy);
  const metrics = new Metrics(
    () => outboxQueue.rows.oldestUnpublishedAgeSeconds(clock.now()),
    () => realtimeRows.oldestUnpublishedAgeSeconds(clock.now()),
  );
  const identity: ApplicationDeps = {
    store: identityStore,
    secrets,
    clock,
    ids,
    allowInsecureUrls: config.allowInsecureCallbacks,
  };

  // The realtime gateway runs in this process; its tokens are signed with a key derived from the keyring.
  const realtimeKey = realtimeTokenKey(config.secretKeyring);
  const gateway = createGateway(config, realtimeKey, () => clock.now().getTime());
  await gateway.ready;
  const app = await createHttpApp({
    rawHandler: (request, response) => gateway.handleHttp(request, response),
    logger,
    bodyLimitBytes: config.bodyLimitBytes,
    requestDeadlineMs: config.requestDeadlineMs,
    publicUrl: config.publicUrl,
    version: serverVersion,
  });
  metrics.instrument(app);
  registerHealthRoutes(app, {
    metrics: metrics.registry,
    readiness: async () => {
      try {
        const current = await migrationsCurrent(sql, latestMigration);
        return {
          ready: current,
          checks: { database: 'ok', migrations: current ? 'ok' : 'pending migrations' },
        };
      } catch (error) {
        return { ready: false, checks: { database: (error as Error).message, migrations: 'unknown' } };
      }
    },
  });
  const registryStore = new PostgresRegistryStore(sql);
  const status: StatusDeps = {
    store: statusStore,
    clock,
    ids,
    signal,
    registries: new RegistryCatalog(registryStore),
    schemas,
    credentials: new JoseExecutionCredentials(config.secretKeyring),
    secrets,
    credentialTtlMs: config.executionCredentialTtlMs,
    defaultHeartbeatIntervalSeconds: config.heartbeatIntervalSeconds,
    defaultHeartbeatTimeoutSeconds: config.heartbeatTimeoutSeconds,
  };
  registerAdminRoutes(app, {
    adminToken: config.adminToken,
    applications: identity,
    authenticator,
    registries: { registries: registryStore, clock, schemas },
  });
  const workerStore = new PostgresWorkerStore(sql);
  const hub = new CommandHub();
  const callbackQueue = new PostgresCallbackQueue(sql);
  let schedulerWake = () => {};
  const candidates = new CandidateSnapshot(
    () => workerStore.candidates(),
    1_000,
    () => performance.now(),
    (error) => logger.warn({ err: error }, 'could not read the worker candidates'),
  );
  const workerDeps: WorkerDeps = {
    status,
    workers: workerStore,
    heartbeatIntervalSeconds: Math.max(1, Math.floor(config.workerHeartbeatTtlMs / 3000)),
    heartbeatTtlMs: config.workerHeartbeatTtlMs,
    credentials: new TtlCache(5_000),
    owners: new TtlCache(10 * 60_000),
    workersChanged: () => {
      candidates.invalidate();
      workerStore.retryDeferred(clock.now()).then(
        () => schedulerWake(),
        (error) => logger.warn({ err: error }, 'could not retry deferred scheduling requests'),
      );
    },
  };
  const dispatchDeps: DispatchDeps = {
    status,
    workers: workerStore,
    heartbeatTtlMs: config.workerHeartbeatTtlMs,
    wake: (commands) => hub.deliver(commands),
    retryUnplaceableMs: 5_000,
    workersEnded: () => candidates.invalidate(),
    roundDone: (full) => candidates.schedulerRound(full),
  };
  const grantDeps: GrantDeps = {
    grants: new PostgresGrantStore(sql),
    provider: httpResourceProvider,
    secrets,
    clock,
    ids,
    allowInsecureUrls: config.allowInsecureCallbacks,
    attempt: async (id) => (await statusStore.attemptsById([id]))[0] ?? null,
    credentialOfWorker: async (id) => (await workerStore.findWorkerOwner(id))?.credentialId ?? null,
    providerOf: async (applicationId) => {
      const application = await identityStore.getApplication(applicationId);
      if (!application?.resourceProviderUrl) return null;
      return {
        url: application.resourceProviderUrl,
        token: openApplicationSecrets(secrets, application).resourceProviderToken,
      };
    },
  };
  registerWorkerRoutes(app, {
    workers: workerDeps,
    grants: grantDeps,
    hub,
    adminToken: config.adminToken,
    authenticator,
  });
  registerRunRoutes(app, { authenticator, runs: tasks, callbacks: callbackQueue, clock });
  const statusReads = new PostgresStatusReads(sql);
  gateway.attach(app.server);
  registerRealtimeRoutes(app, {
    authenticator,
    key: realtimeKey,
    clock,
    reads: statusReads,
    wsUrl: config.realtimeWsUrl,
    detailSubscriptions: (clientId) => gateway.subscriptionCount(clientId, 'task_detail:'),
  });
  const userTokens = new JoseUserTokens(config.secretKeyring);
  registerStatusRoutes(app, {
    authenticator,
    status,
    reads: { reads: statusReads, clock, ids },
    userTokens,
  });
  registerTaskStreamRoutes(app, { gateway, userTokens, clock, reads: statusReads });
  registerDefinitionRoutes(app, {
    authenticator,
    definitions: { store: definitionStore, schemas, clock, ids },
  });
  registerDashboardRoutes(app, {
    reads: new PostgresDashboardReads(sql),
    runs: tasks,
    callbacks: callbackQueue,
    pipeline: { outbox: outboxQueue.rows, realtime: realtimeRows, callbacks: callbackQueue.rows },
    adminToken: config.adminToken,
    sessionKey: derivedKey(config.secretKeyring, config.secretKeyring.activeKeyId, 'dashboard-session'),
    realtimeKey,
    clock,
    task: (taskId) => statusReads.task(taskId),
    unschedulableReasons: (taskId) => workerStore.pendingReasons(taskId),
    listWorkers: () => listWorkerViews(workerDeps),
    pagesDirectory: await dashboardPages(),
    wsUrl: config.realtimeWsUrl,
  });
  const catalog = new DefinitionCatalog(definitionStore);
  registerTaskRoutes(app, {
    authenticator,
    tasks,
    unschedulableReasons: (taskId) => workerStore.pendingReasons(taskId),
    create: {
      store: statusStore,
      definitions: catalog,
      schemas,
      clock,
      ids,
      signal,
      allowInsecureCallbacks: config.allowInsecureCallbacks,
      placement: { ...dispatchDeps, candidates },
    },
    cancel: { store: statusStore, clock, ids, signal },
  });

  const loops: WakeableLoop[] = [];
  let unlisten: (() => Promise<void>) | null = null;
  if (config.runLoops) {
    const outboxLoop = createOutboxLoop({
      queue: outboxQueue,
      publisher,
      clock,
      logger: logger.child({ loop: 'outbox' }),
      observer: {
        published: (_event, committedAt, now) => {
          metrics.outboxPublished.inc();
          metrics.outboxLatency.observe(Math.max(0, now.getTime() - committedAt.getTime()) / 1000);
        },
        failed: (event, error, outcome) => {
          metrics.outboxFailed.labels(outcome ?? 'LOST_CLAIM').inc();
          logger.warn(
            { eventId: event.id, eventType: event.type, err: error, outcome },
            'outbox publication failed',
          );
        },
      },
    });
    loops.push(outboxLoop);
    const scheduler = createSchedulerLoop({
      ...dispatchDeps,
      logger: logger.child({ loop: 'scheduler' }),
      clock,
    });
    schedulerWake = () => scheduler.wake();
    loops.push(scheduler);
    loops.push(
      createLeaseLoop({
        ...dispatchDeps,
        logger: logger.child({ loop: 'leases' }),
        clock,
        intervalMs: 2_000,
      }),
    );
    const realtimePublisher =
      config.centrifugoApiUrl && config.centrifugoApiKey
        ? new CentrifugoApiPublisher(config.centrifugoApiUrl, config.centrifugoApiKey)
        : gatewayPublisher(gateway);
    const realtimeObserver = {
      published: (committedAt: Date, now: Date) =>
        metrics.realtimeLatency.observe(Math.max(0, now.getTime() - committedAt.getTime()) / 1000),
      coalesced: (count: number) => metrics.realtimeCoalesced.inc(count),
      dead: (row: { id: string; channel: string }, error: string) => {
        metrics.realtimeDead.inc();
        logger.warn({ realtimeId: row.id, channel: row.channel, error }, 'realtime message went DEAD');
      },
    };
    const realtimeLoop = createRealtimeLoop({
      rows: realtimeRows,
      publisher: realtimePublisher,
      observer: realtimeObserver,
      clock,
      logger: logger.child({ loop: 'realtime' }),
    });
    loops.push(realtimeLoop);
    // A gateway that outlives this process (Redis, or reached over HTTP) gets what the hand-off could
    // not publish from the relay's loop after 5 s; the in-process memory gateway dies with the process,
    // and its clients then reload snapshots, so its rows are not stored at all.
    signal.realtimeHandoff =
      config.redisUrl || config.centrifugoApiUrl
        ? { kind: 'durable', graceMs: 5_000 }
        : { kind: 'memoryOnly' };
    signal.handoff = new RealtimeHandoff({
      publisher: realtimePublisher,
      ...(signal.realtimeHandoff.kind === 'durable' ? { rows: realtimeRows } : {}),
      clock,
      observer: realtimeObserver,
      onError: (error) =>
        logger.warn({ err: error }, 'realtime hand-off failed; the relay loop will publish'),
    });
    const timerLoop = createTimerLoop({
      status,
      timers: new ClaimableRows(sql, 'timer'),
      logger: logger.child({ loop: 'timers' }),
      clock,
    });
    loops.push(timerLoop);
    const secretsCache = new Map<string, { secrets: string[]; at: number }>();
    const callbackLoop = createCallbackLoop({
      queue: callbackQueue,
      rows: callbackQueue.rows,
      clock,
      logger: logger.child({ loop: 'callbacks' }),
      signingSecrets: async (applicationId) => {
        const cached = secretsCache.get(applicationId);
        if (cached && Date.now() - cached.at < 30_000) return cached.secrets;
        const application = await identityStore.getApplication(applicationId);
        if (!application) return [];
        const opened = openApplicationSecrets(secrets, application);
        const list = [opened.callbackSecret];
        if (
          application.previousCallbackSecretSealed &&
          application.previousCallbackSecretExpiresAt &&
          application.previousCallbackSecretExpiresAt > clock.now()
        ) {
          list.push(
            secrets.open(
              application.previousCallbackSecretSealed,
              `application:${application.id}:callback_secret`,
            ),
          );
        }
        secretsCache.set(applicationId, { secrets: list, at: Date.now() });
        return list;
      },
      post: async (url, body, headers) => {
        // No redirects: a callback goes to the URL the task named, nowhere else.
        const response = await fetch(url, {
          method: 'POST',
          body,
          headers,
          redirect: 'manual',
          signal: AbortSignal.timeout(10_000),
        });
        await response.arrayBuffer().catch(() => undefined);
        return { status: response.status };
      },
    });
    loops.push(callbackLoop);
    signal.loops = {
      outbox: outboxLoop,
      realtime: realtimeLoop,
      scheduler,
      timers: timerLoop,
      callbacks: callbackLoop,
    };
    loops.push(
      createHealthLoop({
        reconciler: new HealthReconciler(status, { graceMs: config.healthGraceMs, maxPerCycle: 100 }),
        logger: logger.child({ loop: 'health' }),
        clock,
        intervalMs: 5_000,
      }),
    );
    const listener = await sql.listen(outboxChannel, () => outboxLoop.wake());
    unlisten = listener.unlisten;
  }

  await app.listen({ host: config.host, port: config.port });
  for (const loop of loops) loop.start();
  // Loops that sleep until a row's due time re-plan after a jump. (The scheduler and the lease reaper
  // run every second or two anyway; waking them at the jump would judge workers before they beat.)
  clock.onJump?.(() => {
    for (const loop of [
      signal.loops.timers,
      signal.loops.callbacks,
      signal.loops.outbox,
      signal.loops.realtime,
    ])
      loop?.wake();
  });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${port}`;

  let closing: Promise<void> | null = null;
  return {
    app,
    sql,
    url,
    identity,
    status,
    logger,
    gateway,
    close: () => {
      closing ??= (async () => {
        await gateway.close();
        await app.close();
        await Promise.all(loops.map((loop) => loop.stop()));
        await signal.handoff?.idle();
        await unlisten?.().catch(() => {});
        await nats?.close().catch(() => {});
        await sql.end({ timeout: 5 });
      })();
      return closing;
    },
  };
}
export { ensureDevelopmentIdentity } from './core/identity/developmentIdentity.ts';
export { generateKeyringEntry, parseKeyring } from './core/identity/secretBox.ts';
export { AppError } from './core/shared/errors.ts';
export { realtimeTokenKey, startGatewayServer } from './realtimeGateway.ts';

/** The dashboard's built pages (packages/dashboard/dist), when they are there. */
async function dashboardPages(): Promise<string | null> {
  const directory = fileURLToPath(new URL('../../dashboard/dist/', import.meta.url));
  return access(join(directory, 'index.html')).then(
    () => directory,
    () => null,
  );
}
