import type { Logger } from 'pino';
import { type SweepDeps, sweepOnce } from '../../core/retention/sweep.ts';
import { type LoopRetry, WakeableLoop } from '../../host/loops/wakeableLoop.ts';

/**
 * The retention sweep (docs/retention.md): rounds follow one another while some table's walk has not
 * reached its end (a table walked to its end waits for the others), then it rests `intervalMs`. A failed round (an archive that cannot be written)
 * backs off like every loop and deletes nothing.
 */
export function createRetentionLoop(
  deps: SweepDeps & { logger: Logger; intervalMs: number; retry: LoopRetry },
): WakeableLoop {
  /** The tables this replica has walked to their end in its current pass. */
  const walked = new Set<string>();
  return new WakeableLoop({
    name: 'retention',
    logger: deps.logger,
    now: () => deps.clock.now(),
    maxIdleMs: deps.intervalMs,
    retry: deps.retry,
    round: async () => {
      const report = await sweepOnce(deps, walked);
      if (report.archivedTasks > 0 || Object.values(report.swept).some((n) => n > 0))
        deps.logger.info({ report }, 'retention round');
      // Every table walked to its end: the pass is over, the next one starts after the rest.
      if (!report.more) walked.clear();
      return { full: report.more };
    },
    nextDueAt: async () => null,
  });
}
