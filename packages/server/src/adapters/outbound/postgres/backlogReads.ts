import type { Backlog, BacklogReads, BacklogTable } from '../../../core/operations/ports.ts';
import type { Sql } from './database.ts';

/** The three claimable tables whose backlog the metrics show, by their metric label. */
const backlogTables: Record<BacklogTable, string> = {
  outbox: 'outbox_event',
  realtime: 'realtime_outbox',
  callbacks: 'callback_delivery',
};

/** What the backlog gauges read at each scrape (docs/observability.md). */
export class PostgresBacklogReads implements BacklogReads {
  constructor(private readonly sql: Sql) {}

  async backlog(table: BacklogTable, now: Date): Promise<Backlog> {
    const rows = await this.sql<{ status: string; count: number; oldest: Date | null }[]>`
      SELECT status, count(*)::int AS count, min(created_at) AS oldest
      FROM ${this.sql(backlogTables[table])}
      WHERE status <> 'PUBLISHED'
      GROUP BY status`;
    const waiting = rows.filter((r) => r.status !== 'DEAD' && r.oldest);
    const oldest = waiting.length ? Math.min(...waiting.map((r) => r.oldest!.getTime())) : null;
    return {
      byStatus: Object.fromEntries(rows.map((r) => [r.status, r.count])),
      oldestAgeSeconds: oldest === null ? 0 : Math.max(0, (now.getTime() - oldest) / 1000),
    };
  }

  /**
   * Running steps whose heartbeats stopped (the health reconciler marked them STALE), from the lease
   * table: it holds the running attempts only and mirrors their health, where the step table holds every
   * step ever run.
   */
  async staleSteps(): Promise<number> {
    const [row] = await this.sql<{ count: number }[]>`
      SELECT count(*)::int AS count FROM execution_lease WHERE health = 'STALE'`;
    return row?.count ?? 0;
  }
}
