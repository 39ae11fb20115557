import type { Backlog, BacklogReads, BacklogTable } from '../../../core/operations/ports.ts';
import type { Sql } from './database.ts';
import { ClaimableRows } from './outboxQueue.ts';

/** What the backlog gauges read at each scrape (docs/observability.md). */
export class PostgresBacklogReads implements BacklogReads {
  /** The three claimable tables whose backlog the metrics show, by their metric label. */
  private readonly tables: Record<BacklogTable, ClaimableRows>;

  constructor(private readonly sql: Sql) {
    this.tables = {
      outbox: new ClaimableRows(sql, 'outbox_event'),
      realtime: new ClaimableRows(sql, 'realtime_outbox'),
      callbacks: new ClaimableRows(sql, 'callback_delivery'),
    };
  }

  backlog(table: BacklogTable, now: Date): Promise<Backlog> {
    return this.tables[table].backlog(now);
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
