import type { Clock } from '../shared/ports.ts';
import type { DomainEvent, EventPublisher, OutboxQueue } from './ports.ts';

export interface DispatchReport {
  claimed: number;
  published: number;
  failed: number;
  dead: number;
  /** Published, but the claim had lapsed: another dispatcher owns the row now and will publish again. */
  lostClaims: number;
}

export interface DispatchObserver {
  published?(event: DomainEvent, committedAt: Date, now: Date): void;
  failed?(event: DomainEvent, error: unknown, outcome: 'FAILED' | 'DEAD' | null): void;
}

/**
 * One round of the outbox: claim due events, publish them, record the outcome while the claim is ours.
 * A crash between publishing and marking leaves the row claimed; when the lease lapses it is published
 * again with the same event id, which the bus and consumers deduplicate.
 */
export async function dispatchOutboxBatch(
  deps: { queue: OutboxQueue; publisher: EventPublisher; clock: Clock; observer?: DispatchObserver },
  limit: number,
): Promise<DispatchReport> {
  const claimed = await deps.queue.claim(deps.clock.now(), limit);
  const report: DispatchReport = { claimed: claimed.length, published: 0, failed: 0, dead: 0, lostClaims: 0 };
  if (claimed.length === 0) return report;
  const claimId = claimed[0]!.claimId;
  const events = claimed.map(
    (row): DomainEvent => ({
      id: row.id,
      type: row.eventType,
      tenantId: row.tenantId,
      applicationId: row.applicationId,
      occurredAt: row.createdAt.toISOString(),
      payload: row.payload,
    }),
  );
  const outcomes = await Promise.allSettled(events.map((event) => deps.publisher.publish(event)));
  const publishedIds: string[] = [];
  for (const [index, outcome] of outcomes.entries()) {
    const row = claimed[index]!;
    if (outcome.status === 'fulfilled') {
      publishedIds.push(row.id);
      continue;
    }
    const message = outcome.reason instanceof Error ? outcome.reason.message : String(outcome.reason);
    const result = await deps.queue.markFailed(
      claimId,
      row.id,
      row.attempts,
      message.slice(0, 1000),
      deps.clock.now(),
    );
    if (result === 'DEAD') report.dead += 1;
    else if (result === 'FAILED') report.failed += 1;
    else report.lostClaims += 1;
    deps.observer?.failed?.(events[index]!, outcome.reason, result);
  }
  if (publishedIds.length > 0) {
    const now = deps.clock.now();
    const marked = new Set(await deps.queue.markPublished(claimId, publishedIds, now));
    report.published = marked.size;
    report.lostClaims += publishedIds.length - marked.size;
    for (const [index, row] of claimed.entries()) {
      if (marked.has(row.id)) deps.observer?.published?.(events[index]!, row.createdAt, now);
    }
  }
  return report;
}
