import type { Logger } from 'pino';
import { type DispatchObserver, dispatchOutboxBatch } from '../../core/outbox/dispatchOutbox.ts';
import type { EventPublisher, OutboxQueue } from '../../core/outbox/ports.ts';
import type { Clock } from '../../core/shared/ports.ts';
import { type Paced, pace, WakeableLoop } from '../../host/loops/wakeableLoop.ts';

/** Publishes committed domain events (`pacing`: the events feature's `outboxLoop`, measured there). */
export function createOutboxLoop(
  deps: {
    queue: OutboxQueue;
    publisher: EventPublisher;
    clock: Clock;
    logger: Logger;
    observer?: DispatchObserver;
  } & Paced,
): WakeableLoop {
  const batchSize = deps.pacing.batchSize;
  return new WakeableLoop({
    name: 'outbox',
    logger: deps.logger,
    now: () => deps.clock.now(),
    ...pace(deps),
    round: async () => {
      const report = await dispatchOutboxBatch(deps, batchSize);
      if (report.failed + report.dead + report.lostClaims > 0)
        deps.logger.warn({ report }, 'outbox round had failures');
      return { full: report.claimed === batchSize };
    },
    nextDueAt: () => deps.queue.nextDueAt(),
  });
}
