/**
 * The realtime hand-off: a transaction's projections are published right after its commit, from
 * memory, instead of waiting for the relay's loop to claim them back from `realtime_outbox`. Commits
 * that end together are published together (in commit order), and their rows (one per commit) marked
 * PUBLISHED in one statement once every message of the row went. The rows were written claimable only a
 * few seconds later, so whatever the hand-off could not publish (the process died, the gateway failed)
 * the loop still claims and publishes: a crash loses nothing. A message sent again carries its id as
 * idempotency key, so the realtime server publishes it once (and clients ignore an older version).
 */

import type { RealtimeRecord } from '../facts/records.ts';
import type { Clock, Tracing } from '../shared/ports.ts';
import {
  type PublishOutcome,
  type RealtimePublisher,
  type RelayObserver,
  supersededProgress,
} from './relay.ts';

export interface HandoffRows {
  /** Marks rows PUBLISHED unless the loop has claimed them meanwhile. */
  markPublishedUnclaimed(ids: string[], now: Date): Promise<void>;
}

export class RealtimeHandoff {
  private queue: RealtimeRecord[] = [];
  private flushing: Promise<void> | null = null;
  /** Published, not yet marked: marked together, one statement at a time (they batch themselves). */
  private unmarked: string[] = [];
  /** Per stored row of the records taken: how many are still to publish, and whether one failed. */
  private readonly rowsInFlight = new Map<string, { left: number; failed: boolean }>();
  private marking: Promise<void> | null = null;
  /**
   * Each record's take: when (its transaction had just committed) and, with tracing on, the
   * `traceparent` of the commit it came from.
   */
  private readonly taken = new Map<string, { at: Date; traceparent: string | undefined }>();

  constructor(
    private readonly deps: {
      publisher: RealtimePublisher;
      /** Where the rows were stored (none: they were not stored, nothing to mark). */
      rows?: HandoffRows;
      clock: Clock;
      observer?: RelayObserver;
      onError?: (error: unknown) => void;
      batchSize?: number;
      tracing?: Tracing;
    },
  ) {}

  /** Committed rows, in commit order. */
  take(records: RealtimeRecord[]): void {
    if (records.length === 0) return;
    // Taken right after the commit, in its request: the publication is a span of that request's trace.
    const take = { at: this.deps.clock.now(), traceparent: this.deps.tracing?.traceparent() };
    for (const record of records) {
      this.taken.set(record.id, take);
      const row = this.rowsInFlight.get(rowOf(record));
      if (row) row.left += 1;
      else this.rowsInFlight.set(rowOf(record), { left: 1, failed: false });
    }
    this.queue.push(...records);
    this.flushing ??= this.flush().finally(() => {
      this.flushing = null;
    });
  }

  /** Resolves once everything taken so far was published and marked (or left for the loop). */
  async idle(): Promise<void> {
    while (this.flushing || this.marking) await (this.flushing ?? this.marking);
  }

  private mark(ids: string[]): void {
    this.unmarked.push(...ids);
    this.marking ??= (async () => {
      while (this.unmarked.length > 0) {
        const batch = this.unmarked.splice(0, 5_000);
        try {
          await this.deps.rows?.markPublishedUnclaimed(batch, this.deps.clock.now());
        } catch (error) {
          // Left PENDING: the loop publishes them again after the grace (a duplicate clients ignore).
          this.deps.onError?.(error);
        }
      }
    })().finally(() => {
      this.marking = null;
    });
  }

  private async flush(): Promise<void> {
    // Let the commits that end in this turn of the event loop join the batch.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.deps.batchSize ?? 500);
      try {
        await this.publish(batch);
      } catch (error) {
        this.deps.onError?.(error);
      }
    }
  }

  private async publish(batch: RealtimeRecord[]): Promise<void> {
    const skipped = supersededProgress(batch);
    const sending = batch.filter((record) => !skipped.has(record.id));
    const startedAt = this.deps.clock.now();
    const takes = new Map(batch.map((row) => [row.id, this.taken.get(row.id)]));
    for (const row of batch) this.taken.delete(row.id);
    let outcomes: PublishOutcome[] = [];
    try {
      outcomes = await this.deps.publisher.publish(
        sending.map((row) => ({ id: row.id, channel: row.channel, data: row.payload })),
      );
    } catch (error) {
      this.deps.onError?.(error);
    }
    const now = this.deps.clock.now();
    const failed = new Set<string>();
    for (const [index, row] of sending.entries()) {
      if (!outcomes[index]?.ok) {
        failed.add(row.id); // its stored row stays PENDING: the loop retries it with back-off
        continue;
      }
      this.deps.observer?.published?.(row.createdAt, now);
      const take = takes.get(row.id);
      if (take) this.deps.observer?.handedOff?.(take.at, now);
      const parent = take?.traceparent;
      if (parent)
        this.deps.tracing?.recordSpan('tdp.realtime.publish', {
          parent,
          kind: 'client',
          startedAt,
          endedAt: now,
          attributes: { taskId: row.aggregateId, outboxId: row.id, channel: row.channel },
        });
    }
    if (skipped.size > 0) this.deps.observer?.coalesced?.(skipped.size);
    const done: string[] = [];
    for (const record of batch) {
      const id = rowOf(record);
      const row = this.rowsInFlight.get(id)!;
      row.left -= 1;
      if (failed.has(record.id)) row.failed = true;
      if (row.left > 0) continue;
      this.rowsInFlight.delete(id);
      if (!row.failed) done.push(id);
    }
    if (done.length > 0 && this.deps.rows) this.mark(done);
  }
}

/** The realtime_outbox row a record is stored in. */
const rowOf = (record: RealtimeRecord) => record.outboxId ?? record.id;
