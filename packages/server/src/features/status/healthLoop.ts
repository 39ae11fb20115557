import type { Logger } from 'pino';
import type { Clock } from '../../core/shared/ports.ts';
import type { HealthReconciler } from '../../core/status/healthReconciler.ts';
import { type LoopRetry, WakeableLoop } from '../../host/loops/wakeableLoop.ts';

/** Runs the health reconciler every `intervalMs`; a failed round restarts its grace period. */
export function createHealthLoop(deps: {
  reconciler: HealthReconciler;
  logger: Logger;
  clock: Clock;
  intervalMs: number;
  retry: LoopRetry;
}): WakeableLoop {
  return new WakeableLoop({
    name: 'health',
    logger: deps.logger,
    now: () => deps.clock.now(),
    maxIdleMs: deps.intervalMs,
    retry: deps.retry,
    round: async () => {
      try {
        const marked = await deps.reconciler.reconcile();
        if (marked > 0) deps.logger.info({ marked }, 'steps marked STALE');
        return { full: false };
      } catch (error) {
        deps.reconciler.databaseFailed();
        throw error;
      }
    },
    nextDueAt: async () => null,
  });
}
