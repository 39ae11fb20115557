/** The composition root, part 3: the HTTP API (routes over the use cases) and the gateway's endpoints. */
import type { FastifyInstance } from 'fastify';
import { registerAdminRoutes } from '../adapters/inbound/http/adminRoutes.ts';
import { createHttpApp } from '../adapters/inbound/http/app.ts';
import { registerOperatorApprovalRoutes } from '../adapters/inbound/http/approvalRoutes.ts';
import { registerBroadcastRoutes } from '../adapters/inbound/http/broadcastRoutes.ts';
import { registerDashboardRoutes } from '../adapters/inbound/http/dashboardRoutes.ts';
import { registerDeadLetterRoutes } from '../adapters/inbound/http/deadLetterRoutes.ts';
import { registerDefinitionRoutes } from '../adapters/inbound/http/definitionsRoutes.ts';
import { registerHealthRoutes } from '../adapters/inbound/http/healthRoutes.ts';
import { registerNotificationRoutes } from '../adapters/inbound/http/notificationRoutes.ts';
import { registerOperatorRoutes } from '../adapters/inbound/http/operatorRoutes.ts';
import { registerOperatorTaskRoutes } from '../adapters/inbound/http/operatorTaskRoutes.ts';
import { documentRateLimits, rateLimitedUserTokens } from '../adapters/inbound/http/rateLimits.ts';
import { registerRealtimeRoutes } from '../adapters/inbound/http/realtimeRoutes.ts';
import { registerRunRoutes } from '../adapters/inbound/http/runRoutes.ts';
import { registerScheduleRoutes } from '../adapters/inbound/http/scheduleRoutes.ts';
import { registerSignalRoutes } from '../adapters/inbound/http/signalRoutes.ts';
import { registerStatusRoutes } from '../adapters/inbound/http/statusRoutes.ts';
import { registerTaskStreamRoutes } from '../adapters/inbound/http/taskStreamRoutes.ts';
import { registerTaskRoutes } from '../adapters/inbound/http/tasksRoutes.ts';
import { registerTelemetryRoutes } from '../adapters/inbound/http/telemetryRoutes.ts';
import { registerUserViewRoutes } from '../adapters/inbound/http/userViewRoutes.ts';
import { listWorkerViews, registerWorkerRoutes } from '../adapters/inbound/http/workerRoutes.ts';
import { derivedKey } from '../adapters/outbound/tokens/executionCredentials.ts';
import { JetStreamBridgeBacklog } from '../adapters/temporal/bridgeBacklog.ts';
import type { ServerConfig } from '../config.ts';
import { requeueDeadLetters } from '../core/operations/requeueDeadLetters.ts';
import { decideApproval } from '../core/orchestration/kinds/approval.ts';
import { sendSignal } from '../core/orchestration/kinds/signal.ts';
import { listAllSchedules } from '../core/schedules/schedules.ts';
import { drainWorkerSession } from '../core/scheduling/drainWorker.ts';
import { setWorkerCordon } from '../core/scheduling/operatorActions.ts';
import { archivedTaskError } from '../core/shared/errors.ts';
import type { Viewer } from '../core/status/ports.ts';
import { registerDevelopmentFiles } from '../development/developmentFiles.ts';
import { dashboardPages } from '../wiring/dashboardPages.ts';
import { type Adapters, natsStream } from './adapters.ts';
import type { UseCases } from './useCases.ts';

export const serverVersion = '0.1.0';

export async function createApi(
  config: ServerConfig,
  a: Adapters,
  uses: UseCases,
  /** What registration announces of the gRPC reporting adapter. */
  reporting: { grpcPort: number | null } = { grpcPort: null },
  /** This replica's Temporal engine: connected or not; null when it runs none (the health page). */
  temporalConnected: () => boolean | null = () => null,
): Promise<FastifyInstance> {
  const { authenticator, clock, ids, gateway, schemas, statusReads, workerStore } = a;
  const app = await createHttpApp({
    rawHandler: (request, response) => gateway.handleHttp(request, response),
    logger: a.logger,
    bodyLimitBytes: config.bodyLimitBytes,
    requestDeadlineMs: config.requestDeadlineMs,
    publicUrl: config.publicUrl,
    version: serverVersion,
  });
  a.metrics.instrument(app);
  documentRateLimits(app);
  const userTokens = rateLimitedUserTokens(a.userTokens, a.rateLimits);
  registerHealthRoutes(app, { metrics: a.metrics.registry, readiness: () => a.health.check() });
  registerAdminRoutes(app, {
    adminToken: config.adminToken,
    applications: uses.identity,
    authenticator,
    registries: { registries: a.registryStore, clock, schemas },
  });
  registerOperatorApprovalRoutes(app, { adminToken: config.adminToken, approvals: uses.status });
  registerUserViewRoutes(app, {
    adminToken: config.adminToken,
    identity: { store: a.identityStore, clock, ids },
    authenticator,
  });
  registerWorkerRoutes(app, {
    workers: uses.workers,
    workerDrain: uses.workerDrain,
    grants: uses.grants,
    hub: uses.hub,
    inbox: uses.status,
    keepAliveMs: config.sseKeepAliveMs,
    resendAfterMs: config.commandResendAfterMs,
    commandPollIntervalMs: config.commandPollIntervalMs,
    adminToken: config.adminToken,
    authenticator,
    rateLimits: a.rateLimits,
    grpcPort: reporting.grpcPort,
  });
  registerRunRoutes(app, {
    authenticator,
    runs: a.tasks,
    callbacks: a.callbackQueue,
    clock,
    archived: a.retentionStore,
  });
  registerDeadLetterRoutes(app, {
    adminToken: config.adminToken,
    requeue: uses.deadLetterRequeue,
  });
  registerOperatorRoutes(app, {
    adminToken: config.adminToken,
    actions: uses.operatorActions,
    audit: uses.operatorAudit,
  });
  registerOperatorTaskRoutes(app, {
    adminToken: config.adminToken,
    jobs: uses.bulkJobs,
    correct: { store: a.statusStore, clock, ids, signal: a.signal, registries: uses.status.registries },
  });
  gateway.attach(app.server);
  // What realtime tokens and the task stream read: tasks, their ACL, and the tenant's applications.
  const realtimeReads = {
    task: (taskId: string) => statusReads.task(taskId),
    canView: (taskId: string, viewer: Viewer) => statusReads.canView(taskId, viewer),
    applicationsOf: async (tenantId: string) =>
      (await a.identityStore.listApplications(tenantId)).map((application) => application.id),
  };
  registerRealtimeRoutes(app, {
    authenticator,
    key: a.realtimeKey,
    clock,
    reads: realtimeReads,
    wsUrl: config.realtimeWsUrl,
    detailSubscriptions: (clientId) => gateway.subscriptionCount(clientId, 'task_detail:'),
    detailLeases: a.detailLeases,
  });
  registerBroadcastRoutes(app, { adminToken: config.adminToken, authenticator, broadcasts: uses.broadcasts });
  registerStatusRoutes(app, {
    authenticator,
    status: uses.status,
    reads: { reads: statusReads, clock, ids, archived: a.retentionStore },
    userTokens,
    rateLimits: a.rateLimits,
  });
  registerTelemetryRoutes(app, {
    userTokens,
    clock,
    commitToVisible: a.taskMetrics.commitToVisible,
    maxSamples: config.visibilityReportMaxSamples,
    rate: config.visibilityReportRate,
  });
  registerNotificationRoutes(app, {
    inbox: { store: a.notificationStore, clock, applicationsOf: realtimeReads.applicationsOf },
    userTokens,
    pageLimit: config.notificationPageLimit,
  });
  registerTaskStreamRoutes(app, {
    gateway,
    userTokens,
    clock,
    reads: realtimeReads,
    keepAliveMs: config.sseKeepAliveMs,
    shared: a.streamSessions,
  });
  registerDefinitionRoutes(app, {
    authenticator,
    definitions: { store: a.definitionStore, schemas, lookup: uses.catalog, clock, ids },
  });
  registerDashboardRoutes(app, {
    reads: a.dashboardReads,
    runs: a.tasks,
    callbacks: a.callbackQueue,
    pipeline: { outbox: a.outboxQueue.rows, realtime: a.realtimeRows, callbacks: a.callbackQueue.rows },
    charts: a.chartReads,
    temporalBridge:
      config.temporal && a.nats
        ? new JetStreamBridgeBacklog(
            () => a.nats!.manager(),
            natsStream(config.natsSubjectPrefix),
            temporalConnected,
          )
        : null,
    adminToken: config.adminToken,
    sessionKey: derivedKey(config.secretKeyring, config.secretKeyring.activeKeyId, 'dashboard-session'),
    realtimeKey: a.realtimeKey,
    clock,
    task: async (taskId) => {
      const state = await statusReads.task(taskId);
      const tombstone = state ? null : await a.retentionStore.find(taskId);
      if (tombstone) throw archivedTaskError(tombstone);
      return state;
    },
    unschedulableReasons: (taskId) => workerStore.pendingReasons(taskId),
    listWorkers: () => listWorkerViews(uses.workers),
    listSchedules: () => listAllSchedules(uses.schedules),
    decide: async ({ reason, ...request }) =>
      (await decideApproval(uses.status, { decider: { kind: 'operator', reason }, reach: null }, request))
        .view,
    signal: async ({ reason, taskId, name, payload, idempotencyKey }) =>
      (await sendSignal(uses.status, { kind: 'operator', reason }, { taskId, name, payload, idempotencyKey }))
        .body,
    operatorActions: {
      drainWorker: (request) => drainWorkerSession(uses.workerDrain, { ...request, actor: 'operator' }),
      cordonWorker: (request) => setWorkerCordon(uses.operatorActions, { ...request, actor: 'operator' }),
      requeueDead: ({ table, reason }) =>
        requeueDeadLetters(uses.deadLetterRequeue, { table, selection: {}, reason, actor: 'operator' }),
    },
    pagesDirectory: await dashboardPages(config.dashboardDirectory ?? null),
    wsUrl: config.realtimeWsUrl,
  });
  registerTaskRoutes(app, {
    authenticator,
    tasks: a.tasks,
    unschedulableReasons: (taskId) => workerStore.pendingReasons(taskId),
    create: uses.taskCreation,
    cancel: { store: a.statusStore, clock, ids, signal: a.signal, cancelGraceMs: config.cancelGraceMs },
    archived: a.retentionStore,
  });
  registerScheduleRoutes(app, { authenticator, schedules: uses.schedules });
  registerSignalRoutes(app, { authenticator, adminToken: config.adminToken, signals: uses.status });
  if (config.developmentFiles)
    registerDevelopmentFiles(app, {
      directory: config.developmentFiles.directory,
      providerToken: config.developmentFiles.providerToken,
      signingKey: derivedKey(config.secretKeyring, config.secretKeyring.activeKeyId, 'development-files'),
      authenticator,
      clock,
      allowInsecureUrls: config.allowInsecureCallbacks,
      grantTtlMs: config.developmentFilesGrantTtlMs,
      maxBytes: config.developmentFilesMaxBytes,
    });
  return app;
}
