/** The workers feature's loops: the scheduler's dispatch rounds and the lease reaper. */
import type { Logger } from 'pino';
import type { Clock } from '../../core/shared/ports.ts';
import { type DispatchDeps, dispatchReady } from '../../core/workers/dispatch.ts';
import { reapLostWorkers } from '../../core/workers/leases.ts';
import { type LoopRetry, type Paced, pace, WakeableLoop } from '../../host/loops/wakeableLoop.ts';

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
