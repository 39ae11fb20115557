import type { Logger } from 'pino';
import type { ClaimableRows } from '../adapters/outbound/postgres/outboxQueue.ts';
import type { CallbackSenderDeps } from '../core/callbacks/sendCallbacks.ts';
import { sendDueCallbacks } from '../core/callbacks/sendCallbacks.ts';
import type { TimerRecord } from '../core/facts/records.ts';
import { type BulkJobRunnerDeps, runBulkJobRound } from '../core/operations/bulkJobs.ts';
import { fireTimer, type TimerDeps } from '../core/orchestration/timers.ts';
import type { CommittedProjectionFollower } from '../core/realtime/follower.ts';
import { type RelayDeps, relayRealtime } from '../core/realtime/relay.ts';
import { type FireDeps, fireDueSchedules } from '../core/schedules/fireSchedules.ts';
import { type DispatchDeps, dispatchReady } from '../core/scheduling/dispatch.ts';
import { reapLostWorkers } from '../core/scheduling/leases.ts';
import type { Clock } from '../core/shared/ports.ts';
import { type LoopRetry, type Paced, pace, WakeableLoop } from './wakeableLoop.ts';

/** Places ready steps on workers; woken by every commit and by worker changes, else every second. */
export function createSchedulerLoop(
  deps: DispatchDeps & Paced & { logger: Logger; clock: Clock },
): WakeableLoop {
  const batch = deps.pacing.batchSize;
  return new WakeableLoop({
    name: 'scheduler',
    logger: deps.logger,
    now: () => deps.clock.now(),
    ...pace(deps),
    round: async () => ({ full: (await dispatchReady(deps, batch)) === batch }),
    nextDueAt: async () => null,
  });
}

/** Fires due timers (retry back-off) through the fact path. */
export function createTimerLoop(
  deps: {
    status: TimerDeps;
    timers: ClaimableRows;
    logger: Logger;
    clock: Clock;
  } & Paced,
): WakeableLoop {
  const batch = deps.pacing.batchSize;
  return new WakeableLoop({
    name: 'timers',
    logger: deps.logger,
    now: () => deps.clock.now(),
    ...pace(deps),
    round: async () => {
      const due = await deps.timers.claim<{
        kind: TimerRecord['kind'];
        task_id: string;
        step_id: string | null;
        payload: Record<string, unknown>;
      }>(deps.clock.now(), batch);
      for (const timer of due) {
        try {
          await fireTimer(deps.status, {
            id: timer.id,
            kind: timer.kind,
            taskId: timer.task_id,
            stepId: timer.step_id,
            payload: timer.payload,
          });
          await deps.timers.markPublished(timer.claim_id, [timer.id], deps.clock.now());
        } catch (error) {
          await deps.timers.markFailed(
            timer.claim_id,
            timer.id,
            timer.attempts,
            (error as Error).message,
            deps.clock.now(),
          );
        }
      }
      return { full: due.length === batch };
    },
    nextDueAt: () => deps.timers.nextDueAt(),
  });
}

export function createCallbackLoop(
  deps: CallbackSenderDeps & Paced & { rows: ClaimableRows; logger: Logger; name?: string },
): WakeableLoop {
  const batch = deps.pacing.batchSize;
  return new WakeableLoop({
    name: deps.name ?? 'callbacks',
    logger: deps.logger,
    now: () => deps.clock.now(),
    ...pace(deps),
    round: async () => {
      const report = await sendDueCallbacks(deps, batch);
      if (report.dead > 0) deps.logger.warn({ report }, `${deps.name ?? 'callbacks'} went DEAD`);
      return { full: report.claimed === batch };
    },
    nextDueAt: () => deps.rows.nextDueAt(),
  });
}

/** Ends silent worker sessions and retries what they held. */
export function createLeaseLoop(
  deps: DispatchDeps & { logger: Logger; clock: Clock; intervalMs: number; retry: LoopRetry },
): WakeableLoop {
  return new WakeableLoop({
    name: 'leases',
    logger: deps.logger,
    now: () => deps.clock.now(),
    maxIdleMs: deps.intervalMs,
    retry: deps.retry,
    round: async () => {
      const reaped = await reapLostWorkers(deps);
      if (reaped > 0) deps.logger.warn({ reaped }, 'attempts of lost workers failed over');
      return { full: false };
    },
    nextDueAt: async () => null,
  });
}

/** Publishes committed realtime projections to the gateway, in commit order. */
export function createRealtimeLoop(deps: RelayDeps & Paced & { logger: Logger }): WakeableLoop {
  const batch = deps.pacing.batchSize;
  return new WakeableLoop({
    name: 'realtime',
    logger: deps.logger,
    now: () => deps.clock.now(),
    ...pace(deps),
    round: async () => ({ full: (await relayRealtime(deps, batch)) === batch }),
    nextDueAt: async () => null,
  });
}

/**
 * Feeds this replica's gateway (its task streams) from the realtime rows every replica committed, when
 * Centrifugo serves the browsers: woken by this process's commits, else every `pollMs`.
 */
export function createProjectionFollowLoop(deps: {
  follower: CommittedProjectionFollower;
  batchSize: number;
  pollMs: number;
  logger: Logger;
  clock: Clock;
  retry: LoopRetry;
}): WakeableLoop {
  return new WakeableLoop({
    name: 'realtime-follow',
    logger: deps.logger,
    now: () => deps.clock.now(),
    maxIdleMs: deps.pollMs,
    batchWindowMs: 0,
    retry: deps.retry,
    round: async () => ({ full: (await deps.follower.round()) === deps.batchSize }),
    nextDueAt: async () => null,
  });
}

/** Starts the tasks of due schedules (and queued QUEUE_ONE fires); sleeps until the next fire time. */
export function createScheduleLoop(deps: FireDeps & Paced & { logger: Logger }): WakeableLoop {
  const batch = deps.pacing.batchSize;
  return new WakeableLoop({
    name: 'schedules',
    logger: deps.logger,
    now: () => deps.clock.now(),
    ...pace(deps),
    round: async () => ({ full: (await fireDueSchedules(deps, batch)) === batch }),
    nextDueAt: () => deps.schedules.nextDueAt(),
  });
}

/**
 * Runs bulk cancel and retry jobs (any replica; a job is held by one claim at a time). Woken when a job
 * is created here; otherwise looks every `pollMs` for a job created elsewhere or whose claim expired.
 */
export function createBulkJobLoop(
  deps: BulkJobRunnerDeps & { logger: Logger; pollMs: number; retry: LoopRetry },
): WakeableLoop {
  return new WakeableLoop({
    name: 'bulkJobs',
    logger: deps.logger,
    now: () => deps.clock.now(),
    maxIdleMs: deps.pollMs,
    retry: deps.retry,
    round: async () => ({ full: await runBulkJobRound(deps) }),
    nextDueAt: () => deps.jobs.nextDueAt(deps.clock.now()),
  });
}
