/** The composition root, part 2: the use cases' dependencies, built from the config and the adapters. */

import { httpResourceProvider } from '../adapters/outbound/http/resourceProvider.ts';
import { PostgresBroadcastStore } from '../adapters/outbound/postgres/broadcastStore.ts';
import { PostgresBulkJobStore } from '../adapters/outbound/postgres/bulkJobStore.ts';
import { PostgresDeadLetters } from '../adapters/outbound/postgres/deadLetterStore.ts';
import { PostgresGrantStore } from '../adapters/outbound/postgres/grantStore.ts';
import { PostgresOperatorStore } from '../adapters/outbound/postgres/operatorStore.ts';
import { PostgresScheduleStore } from '../adapters/outbound/postgres/scheduleStore.ts';
import { JoseExecutionCredentials } from '../adapters/outbound/tokens/executionCredentials.ts';
import type { ServerConfig } from '../config.ts';
import { DefinitionCatalog } from '../core/definitions/catalog.ts';
import { RegistryCatalog } from '../core/definitions/registries.ts';
import type { GrantDeps } from '../core/grants/grants.ts';
import { type ApplicationDeps, openApplicationSecrets } from '../core/identity/applications.ts';
import type { BulkJobDeps, BulkJobRunnerDeps } from '../core/operations/bulkJobs.ts';
import type { RequeueDeps } from '../core/operations/requeueDeadLetters.ts';
import type { TimerDeps } from '../core/orchestration/timers.ts';
import type { BroadcastDeps } from '../core/realtime/broadcasts.ts';
import type { FireDeps } from '../core/schedules/fireSchedules.ts';
import type { ScheduleDeps } from '../core/schedules/schedules.ts';
import { CandidateSnapshot } from '../core/scheduling/candidateSnapshot.ts';
import { CommandHub } from '../core/scheduling/commands.ts';
import type { DispatchDeps } from '../core/scheduling/dispatch.ts';
import type { DrainWorkerDeps } from '../core/scheduling/drainWorker.ts';
import type { OperatorActionDeps } from '../core/scheduling/operatorActions.ts';
import type { WorkerDeps } from '../core/scheduling/workers.ts';
import { TtlCache } from '../core/shared/ttlCache.ts';
import type { StatusDeps } from '../core/status/deps.ts';
import type { CreateTaskDeps } from '../core/tasks/createTask.ts';
import { bulkTaskActions } from '../wiring/bulkTaskActions.ts';
import { CapacityWakeup } from '../wiring/capacityWakeup.ts';
import { childTaskCancel } from '../wiring/childTasks.ts';
import { CommandWakeup, commandChannel } from '../wiring/commandWakeup.ts';
import { scheduledTasks } from '../wiring/scheduledTasks.ts';
import type { Adapters } from './adapters.ts';

export type UseCases = ReturnType<typeof useCaseDeps>;

export function useCaseDeps(config: ServerConfig, a: Adapters) {
  const { clock, ids, secrets, signal, logger, workerStore, statusStore, identityStore } = a;
  const identity: ApplicationDeps = {
    store: identityStore,
    secrets,
    clock,
    ids,
    allowInsecureUrls: config.allowInsecureCallbacks,
  };
  const status: StatusDeps = {
    store: statusStore,
    clock,
    ids,
    signal,
    registries: new RegistryCatalog(a.registryStore),
    schemas: a.schemas,
    credentials: new JoseExecutionCredentials(config.secretKeyring),
    secrets,
    credentialTtlMs: config.executionCredentialTtlMs,
    defaultHeartbeatIntervalSeconds: config.heartbeatIntervalSeconds,
    defaultHeartbeatTimeoutSeconds: config.heartbeatTimeoutSeconds,
    tracing: a.tracing,
    observer: a.taskMetrics,
  };
  const hub = new CommandHub();
  signal.commands = new CommandWakeup(hub, (payload) => a.sql.notify(commandChannel, payload));
  const capacity = new CapacityWakeup(
    () => workerStore.retryDeferred(clock.now()),
    // The scheduler loop exists when the loops run; otherwise another replica's scheduler places them.
    () => signal.loops.scheduler?.wake(),
    config.capacityRetryMinIntervalMs,
    (error) => logger.warn({ err: error }, 'could not retry the steps waiting for a worker'),
  );
  signal.capacity = capacity;
  const candidates = new CandidateSnapshot(
    () => workerStore.candidates(),
    config.workerCandidatesMaxAgeMs,
    () => performance.now(),
    (error) => logger.warn({ err: error }, 'could not read the worker candidates'),
  );
  const workers: WorkerDeps = {
    clock,
    workers: workerStore,
    heartbeatIntervalSeconds: Math.max(
      1,
      Math.floor(config.workerHeartbeatTtlMs / (config.workerHeartbeatsPerTtl * 1000)),
    ),
    heartbeatTtlMs: config.workerHeartbeatTtlMs,
    defaultMaxConcurrency: config.workerDefaultMaxConcurrency,
    credentials: new TtlCache(clock, config.workerCredentialsCacheMs),
    owners: new TtlCache(clock, config.workerOwnersCacheMs),
    // A worker registered or changed: as when capacity frees, the put-back requests are retried now
    // (through the same coalescing wake-up, so a burst of registrations is one update).
    workersChanged: () => {
      candidates.invalidate();
      capacity.freed();
    },
  };
  // The operator's drain: this process's stream sends the command at once, another replica's is told.
  const workerDrain: DrainWorkerDeps = {
    clock,
    workers: workerStore,
    delivered: (commands) => {
      hub.deliver(commands);
      signal.commands?.committed(commands.map((c) => c.workerId));
    },
    workersChanged: workers.workersChanged,
  };
  const operatorStore = new PostgresOperatorStore(a.sql);
  const operatorActions: OperatorActionDeps = { ...workerDrain, store: operatorStore };
  const broadcasts: BroadcastDeps = {
    store: new PostgresBroadcastStore(a.sql),
    clock,
    ids,
    tenantExists: async (tenantId) => (await identityStore.getTenant(tenantId)) !== null,
    // The relay's loop in this process publishes it now (another replica's finds it when it polls).
    committed: () => signal.loops.realtime?.wake(),
  };
  const deadLetterRequeue: RequeueDeps = {
    clock,
    deadLetters: new PostgresDeadLetters(a.sql),
    requeueLimit: config.deadLetterRequeueLimit,
    // The table's loop in this process sends them now (another replica's finds them when it polls).
    requeued: (table) => signal.loops[table]?.wake(),
  };
  const dispatch: DispatchDeps = {
    status,
    workers: workerStore,
    heartbeatTtlMs: config.workerHeartbeatTtlMs,
    wake: (commands) => hub.deliver(commands),
    retryUnplaceableMs: config.retryUnplaceableMs,
    workersEnded: () => candidates.invalidate(),
    roundDone: (full) => candidates.schedulerRound(full),
    capacity,
  };
  const grants: GrantDeps = {
    grants: new PostgresGrantStore(a.sql),
    provider: httpResourceProvider(config.resourceProviderTimeoutMs),
    secrets,
    clock,
    ids,
    allowInsecureUrls: config.allowInsecureCallbacks,
    replayRenewal: config.grantReplayRenewal,
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
  const catalog = new DefinitionCatalog(a.definitionStore);
  const taskCreation: CreateTaskDeps = {
    store: a.statusStore,
    definitions: catalog,
    schemas: a.schemas,
    clock,
    ids,
    signal,
    allowInsecureCallbacks: config.allowInsecureCallbacks,
    engine: config.orchestrator,
    placement: { ...dispatch, candidates },
    tracing: a.tracing,
  };
  const scheduleStore = new PostgresScheduleStore(a.sql);
  const schedules: ScheduleDeps = {
    schedules: scheduleStore,
    definitions: catalog,
    schemas: a.schemas,
    clock,
    ids,
    listedFireTimes: config.scheduleListedFireTimes,
    listLimit: config.scheduleListLimit,
  };
  // The timers loop: the coordinator's deps, and what child tasks need (their workflow, their cancel).
  const timers: TimerDeps = {
    ...status,
    definitions: catalog,
    children: childTaskCancel({
      store: statusStore,
      clock,
      ids,
      signal,
      cancelGraceMs: config.cancelGraceMs,
    }),
  };
  // Bulk cancel and retry: jobs started by the routes, run by the bulk job loop of any replica through
  // the tasks context's own cancel and retry.
  const bulkJobStore = new PostgresBulkJobStore(a.sql);
  const bulkJobs: BulkJobDeps = {
    jobs: bulkJobStore,
    clock,
    ids,
    taskLimit: config.bulkJobTaskLimit,
    started: () => signal.loops.bulkJobs?.wake(),
  };
  const bulkJobRunner: BulkJobRunnerDeps = {
    jobs: bulkJobStore,
    actions: bulkTaskActions({ store: statusStore, clock, ids, signal, cancelGraceMs: config.cancelGraceMs }),
    clock,
    ids,
    batchSize: config.bulkJobBatchSize,
    claimMs: config.bulkJobClaimMs,
  };
  const scheduleFiring: FireDeps = {
    schedules: scheduleStore,
    tasks: scheduledTasks(taskCreation, a.tasks),
    clock,
    misfireGraceMs: config.scheduleMisfireGraceMs,
  };
  return {
    identity,
    status,
    hub,
    candidates,
    workers,
    workerDrain,
    operatorActions,
    operatorAudit: operatorStore,
    broadcasts,
    deadLetterRequeue,
    dispatch,
    grants,
    catalog,
    taskCreation,
    schedules,
    scheduleFiring,
    timers,
    bulkJobs,
    bulkJobRunner,
  };
}
