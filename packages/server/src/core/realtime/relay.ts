/**
 * The realtime relay (source document 002 §6): claims committed `realtime_outbox` rows with the shared
 * claim mechanism and publishes each to its channel, in commit order. A row whose publication fails is
 * retried with back-off (DEAD after the limit), so a gateway that is down loses nothing.
 */
import type { Clock } from '../shared/ports.ts';

/** Where projections go: the in-process gateway, or a Centrifugo-compatible HTTP API. */
export interface RealtimePublisher {
  publish(channel: string, data: unknown): Promise<void>;
}

export interface RealtimeRows {
  claim<Row extends object>(
    now: Date,
    limit: number,
  ): Promise<(Row & { id: string; claim_id: string; attempts: number })[]>;
  markPublished(claimId: string, ids: string[], now: Date): Promise<string[]>;
  markFailed(claimId: string, id: string, attempts: number, error: string, now: Date): Promise<unknown>;
}

export interface RelayDeps {
  rows: RealtimeRows;
  publisher: RealtimePublisher;
  clock: Clock;
}

/** One round; returns how many rows it claimed. */
export async function relayRealtime(deps: RelayDeps, limit: number): Promise<number> {
  const rows = await deps.rows.claim<{ channel: string; payload: unknown; created_at: Date }>(
    deps.clock.now(),
    limit,
  );
  if (rows.length === 0) return 0;
  const published: string[] = [];
  for (const row of rows) {
    try {
      await deps.publisher.publish(row.channel, row.payload);
      published.push(row.id);
    } catch (error) {
      await deps.rows.markFailed(
        row.claim_id,
        row.id,
        row.attempts,
        (error as Error).message,
        deps.clock.now(),
      );
    }
  }
  if (published.length > 0) await deps.rows.markPublished(rows[0]!.claim_id, published, deps.clock.now());
  return rows.length;
}
