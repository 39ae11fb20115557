/**
 * Workers: registration, keys, heartbeats, drains and command streams, and placing ready steps on them — the scheduler's rounds, the lease reaper for lost workers, the durable command hub, and the
 * wake-ups that follow a commit: new scheduling requests wake the scheduler, freed capacity retries the
 * steps waiting for a worker, new commands reach the stream that holds their worker (here or, by a
 * NOTIFY, on another replica).
 */
import { defaultWorkerConcurrency } from '@tdp/protocol';
import { Type } from 'typebox';
import { registerSchedulingRoutes } from '../../adapters/inbound/http/schedulingRoutes.ts';
import { registerWorkerRoutes } from '../../adapters/inbound/http/workerRoutes.ts';
import { stopListening } from '../../adapters/outbound/postgres/database.ts';
import { PostgresSchedulingControlStore } from '../../adapters/outbound/postgres/schedulingControlStore.ts';
import { PostgresWorkerStore } from '../../adapters/outbound/postgres/workerStore.ts';
import { TtlCache } from '../../core/shared/ttlCache.ts';
import { CandidateSnapshot } from '../../core/workers/candidateSnapshot.ts';
import { CommandHub } from '../../core/workers/commands.ts';
import { type DispatchDeps, dispatchReady } from '../../core/workers/dispatch.ts';
import type { DrainWorkerDeps } from '../../core/workers/drainWorker.ts';
import { reapLostWorkers, releaseUnheldAttempts } from '../../core/workers/leases.ts';
import type { SchedulingControlDeps } from '../../core/workers/schedulingControls.ts';
import type { WorkerDeps } from '../../core/workers/workers.ts';
import { defineFeature } from '../../host/feature.ts';
import type { LoopPacing } from '../../host/loops/wakeableLoop.ts';
import { setting, settingsSlice } from '../../host/settings.ts';
import { CapacityWakeup } from './capacityWakeup.ts';
import { CommandWakeup, commandChannel, listenForCommands } from './commandWakeup.ts';

export interface Workers {
  workerStore: PostgresWorkerStore;
  hub: CommandHub;
  candidates: CandidateSnapshot;
  /** Registration, keys and heartbeats of worker sessions. */
  registration: WorkerDeps;
  workerDrain: DrainWorkerDeps;
  dispatch: DispatchDeps;
  /** Concurrency keys' limits and pauses, and fair-share weights (the dashboard's queue page changes them too). */
  schedulingControls: SchedulingControlDeps;
}

declare module '../../host/provisions.ts' {
  interface Provisions {
    workers: Workers;
  }
}

const settings = settingsSlice(
  Type.Object({
    workerHeartbeatTtlMs: setting.integer({
      env: 'TDP_WORKER_HEARTBEAT_TTL_MS',
      default: 30_000,
      description: 'A worker whose heartbeats stop for this long is not given new work.',
    }),
    workerHeartbeatsPerTtl: setting.value({
      default: 3,
      description: 'Workers are asked to beat this many times per `workerHeartbeatTtlMs`.',
    }),
    workerDefaultMaxConcurrency: setting.value({
      default: defaultWorkerConcurrency,
      description:
        "Attempts at once on a worker whose registration names no `maxConcurrency` (the runtime's default).",
    }),
    workerCredentialsCacheMs: setting.value({
      default: 5_000,
      description: 'How long a worker credential, once read, is reused.',
    }),
    workerOwnersCacheMs: setting.value({
      default: 10 * 60_000,
      description: "How long a worker's owner, once read, is reused.",
    }),
    workerCandidatesMaxAgeMs: setting.value({
      default: 1_000,
      description: 'Age up to which task creation places steps from the last read of the workers.',
    }),
    retryUnplaceableMs: setting.integer({
      env: 'TDP_RETRY_UNPLACEABLE_MS',
      default: 5_000,
      description: 'A scheduling request no worker can take is tried again after this long.',
    }),
    priorityAgingStepMs: setting.integer({
      env: 'TDP_PRIORITY_AGING_STEP_MS',
      default: 1_000,
      description:
        'Within an application, a step of priority p is placed as if it had waited p times this long: priority orders the work, and waiting ages it, so low priority never starves.',
    }),
    capacityRetryMinIntervalMs: setting.value({
      default: 50,
      description: 'Freed worker capacity retries the steps waiting for a worker at most this often.',
    }),
    leaseCheckIntervalMs: setting.integer({
      env: 'TDP_LEASE_CHECK_INTERVAL_MS',
      default: 2_000,
      description: 'How often the lease loop looks for silent worker sessions.',
    }),
    commandResendAfterMs: setting.value({
      default: 30_000,
      description: "A worker command not acknowledged by then is sent again on the worker's stream.",
    }),
    commandPollIntervalMs: setting.value({
      default: 1_000,
      description:
        "How often an open command stream reads its worker's open commands (other replicas' commands).",
    }),
    schedulerLoop: setting.value<LoopPacing>({
      // A round locks its tasks and writes its attempts together, so a bigger round costs little more
      // than a small one; 50 measured best in `bench -- e2e` (20: −25 %, 100: −7 %).
      default: { batchSize: 50, maxIdleMs: 1_000, batchWindowMs: 2 },
      description: "The scheduler loop's pacing.",
    }),
  }),
);

export const workersFeature = defineFeature({
  name: 'workers',
  settings,
  async start(host, settings) {
    const { clock, logger, afterCommit } = host;
    const workerStore = new PostgresWorkerStore(host.sql);
    const hub = new CommandHub();
    // Streams held here hear at once of commands another replica wrote for their workers.
    const commandWakeup = new CommandWakeup(hub, (payload) => host.sql.notify(commandChannel, payload));
    const capacity = new CapacityWakeup(
      () => workerStore.retryDeferred(clock.now()),
      // When this replica runs no scheduler, another replica's places them.
      () => host.loops.wake('scheduler'),
      settings.capacityRetryMinIntervalMs,
      (error) => logger.warn({ err: error }, 'could not retry the steps waiting for a worker'),
    );
    const candidates = new CandidateSnapshot(
      () => workerStore.candidates(),
      settings.workerCandidatesMaxAgeMs,
      () => performance.now(),
      (error) => logger.warn({ err: error }, 'could not read the worker candidates'),
    );
    // A worker registered or changed: as when capacity frees, the put-back requests are retried now
    // (through the same coalescing wake-up, so a burst of registrations is one update).
    const workersChanged = () => {
      candidates.invalidate();
      capacity.freed();
    };
    const registration: WorkerDeps = {
      clock,
      workers: workerStore,
      heartbeatIntervalSeconds: Math.max(
        1,
        Math.floor(settings.workerHeartbeatTtlMs / (settings.workerHeartbeatsPerTtl * 1000)),
      ),
      heartbeatTtlMs: settings.workerHeartbeatTtlMs,
      defaultMaxConcurrency: settings.workerDefaultMaxConcurrency,
      credentials: new TtlCache(clock, settings.workerCredentialsCacheMs),
      owners: new TtlCache(clock, settings.workerOwnersCacheMs),
      workersChanged,
    };
    // The operator's drain: this process's stream sends the command at once, another replica's is told.
    const workerDrain: DrainWorkerDeps = {
      clock,
      workers: workerStore,
      delivered: (commands) => {
        hub.deliver(commands);
        commandWakeup.committed(commands.map((c) => c.workerId));
      },
      workersChanged,
    };
    const dispatch: DispatchDeps = {
      status: host.need('status').deps,
      workers: workerStore,
      heartbeatTtlMs: settings.workerHeartbeatTtlMs,
      wake: (commands) => hub.deliver(commands),
      retryUnplaceableMs: settings.retryUnplaceableMs,
      agingStepMs: settings.priorityAgingStepMs,
      workersEnded: () => candidates.invalidate(),
      roundDone: (full) => candidates.schedulerRound(full),
      capacity,
    };
    // Applications' and operators' changes to keys and weights; parked steps may then have room.
    const schedulingControls: SchedulingControlDeps = {
      clock,
      store: new PostgresSchedulingControlStore(host.sql),
      keysChanged: () => host.loops.wake('scheduler'),
    };
    host.provide('workers', {
      workerStore,
      hub,
      candidates,
      registration,
      workerDrain,
      dispatch,
      schedulingControls,
    });
    // A worker key revoked on any replica is forgotten here at once (REST and gRPC read this cache).
    host.need('identity').revocations.subscribe((revocation) => {
      if (revocation.kind === 'workerKey') registration.credentials.delete(revocation.keyId);
    });
    afterCommit.subscribe({
      committed: (work) => {
        if (work.scheduling) host.loops.wake('scheduler');
        if (work.commandsFor.length > 0) commandWakeup.committed(work.commandsFor);
        if (work.capacityFreed) capacity.freed();
      },
    });
    const unlistenCommands = await listenForCommands(host.sql, hub);
    const { batchSize } = settings.schedulerLoop;
    const loops = () => [
      // Places ready steps on workers; woken by commits and by worker changes, else every second.
      host.loop({
        name: 'scheduler',
        ...settings.schedulerLoop,
        round: async () => ({ full: (await dispatchReady(dispatch, batchSize)) === batchSize }),
      }),
      // Ends silent worker sessions and retries what they held; lets in steps parked on a pool with room.
      host.loop({
        name: 'leases',
        maxIdleMs: settings.leaseCheckIntervalMs,
        round: async (loopLogger) => {
          const reaped = await reapLostWorkers(dispatch);
          if (reaped > 0) loopLogger.warn({ reaped }, 'attempts of lost workers failed over');
          // Steps parked on a concurrency key whose pool has room after all (docs/scheduling.md).
          if ((await workerStore.unparkWithRoom(clock.now())) > 0) host.loops.wake('scheduler');
          return { full: false };
        },
      }),
    ];
    return {
      loops: host.settings.runLoops ? loops() : [],
      routes: async (app) => {
        const identity = host.need('identity');
        registerWorkerRoutes(app, {
          workers: registration,
          releaseUnheld: (workerId, held) => releaseUnheldAttempts(dispatch, workerId, held),
          workerDrain,
          grants: host.need('grants'),
          hub,
          inbox: host.need('status').deps,
          keepAliveMs: host.settings.sseKeepAliveMs,
          resendAfterMs: settings.commandResendAfterMs,
          commandPollIntervalMs: settings.commandPollIntervalMs,
          operators: host.need('operators'),
          authenticator: identity.authenticator,
          rateLimits: identity.rateLimits,
          grpcPort: host.need('grpc').port,
          revocations: identity.revocations,
        });
        registerSchedulingRoutes(app, {
          gate: host.need('operators').gate,
          authenticator: identity.authenticator,
          controls: schedulingControls,
        });
      },
      stop: async () => {
        await capacity.stop();
        await stopListening(unlistenCommands);
      },
    };
  },
});
