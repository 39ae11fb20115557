import type { Logger } from 'pino';
import { type ChartSamplerDeps, sampleMinute } from '../core/operations/charts.ts';
import { type LoopRetry, WakeableLoop } from './wakeableLoop.ts';

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
