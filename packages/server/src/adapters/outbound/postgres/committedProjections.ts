import type { CommittedProjectionReads, CommittedWindow } from '../../../core/realtime/follower.ts';
import type { Sql } from './database.ts';

/**
 * The realtime rows other transactions committed since a snapshot (migration 025): a row is new when the
 * transaction that wrote it (`written_by`) was not visible in the previous snapshot and is in the upper
 * one. Unlike a cursor on an id or a time, no row is missed when transactions commit out of the order in
 * which they began, and none waits for a long transaction to end.
 */
export class PostgresCommittedProjections implements CommittedProjectionReads {
  constructor(private readonly sql: Sql) {}

  async snapshot(): Promise<string> {
    const [row] = await this.sql<{ snapshot: string }[]>`SELECT pg_current_snapshot()::text AS snapshot`;
    return row!.snapshot;
  }

  async committed(window: CommittedWindow, limit: number) {
    const after = window.after;
    return this.sql<
      { written_by: string; id: string; messages: { id: string; channel: string; payload: unknown }[] }[]
    >`
      SELECT written_by::text, id, messages FROM realtime_outbox
      WHERE written_by >= pg_snapshot_xmin(${window.since}::pg_snapshot)
        AND NOT pg_visible_in_snapshot(written_by, ${window.since}::pg_snapshot)
        AND pg_visible_in_snapshot(written_by, ${window.upTo}::pg_snapshot)
        ${after ? this.sql`AND (written_by, id) > (${after.writtenBy}::xid8, ${after.id}::uuid)` : this.sql``}
      ORDER BY written_by, id
      LIMIT ${limit}`.then((rows) =>
      rows.map((row) => ({
        writtenBy: row.written_by,
        id: row.id,
        messages: row.messages.map((m) => ({ id: m.id, channel: m.channel, payload: m.payload })),
      })),
    );
  }
}
