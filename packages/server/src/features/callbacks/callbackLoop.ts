import type { Logger } from 'pino';
import type { ClaimableRows } from '../../adapters/outbound/postgres/outboxQueue.ts';
import { type CallbackSenderDeps, sendDueCallbacks } from '../../core/callbacks/sendCallbacks.ts';
import { type Paced, pace, WakeableLoop } from '../../host/loops/wakeableLoop.ts';

/** Sends due signed deliveries (callbacks, or offline notifications under another `name`). */
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
