/** The operations feature's loops: the charts' sampler and the bulk jobs' runner. */
import type { Logger } from 'pino';
import { type BulkJobRunnerDeps, runBulkJobRound } from '../../core/operations/bulkJobs.ts';
import { type ChartSamplerDeps, sampleMinute } from '../../core/operations/charts.ts';
import { type LoopRetry, WakeableLoop } from '../../host/loops/wakeableLoop.ts';

/**
 * Writes the charts' gauge sample of each minute (the first replica to look writes it) and deletes
 * samples past their retention. It looks every `intervalMs`, well under a minute, so no minute is missed.
 */
export function createChartSamplerLoop(
  deps: ChartSamplerDeps & { logger: Logger; intervalMs: number; retry: LoopRetry },
): WakeableLoop {
  return new WakeableLoop({
    name: 'chart-sampler',
    logger: deps.logger,
    now: () => deps.clock.now(),
    maxIdleMs: deps.intervalMs,
    retry: deps.retry,
    round: async () => {
      await sampleMinute(deps);
      return { full: false };
    },
    nextDueAt: async () => null,
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
