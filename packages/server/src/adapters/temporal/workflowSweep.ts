/**
 * The recovery path for a workflow Temporal lost (an in-memory server restarted, a namespace dropped,
 * a history deleted): every so often, the engine starts the workflow of each unfinished `temporal`
 * execution that has not moved for a while. A start is safe to repeat — a running workflow is kept
 * (USE_EXISTING) and a closed one is not run again (REJECT_DUPLICATE) — so for a healthy execution it
 * changes nothing; a lost one gets a new run, which adopts the execution from TDP's state (the steps
 * that finished meanwhile are decided first; see executionWorkflow.ts). The sweep walks the executions
 * by id, `batch` at a time, from where the last round stopped, so a large backlog of long waits costs
 * one bounded round per interval. With several replicas one of them sweeps per interval: a round runs
 * where it takes the `loop_lease` row (migration 031), which also holds the walk's position.
 */
import { newId } from '@tdp/protocol';
import type { Sql } from '../outbound/postgres/database.ts';
import type { ExecutionDriver } from './temporalEngine.ts';

export interface SweepOptions {
  sql: Sql;
  driver: Pick<ExecutionDriver, 'start'>;
  now: () => Date;
  /** An execution unchanged for this long is looked at. */
  idleMs: number;
  /** How long a round's lease keeps the other replicas' rounds away (the loop's interval). */
  leaseMs: number;
  batch?: number;
}

const first = '00000000-0000-0000-0000-000000000000';

const leaseName = 'temporal-sweep';

export class WorkflowSweep {
  /** This sweep's name on the lease: a round that follows one of its own may run at once. */
  private readonly holder = newId();

  constructor(private readonly options: SweepOptions) {}

  /**
   * The lease, unless another replica holds it: then null. Returns the last execution id looked at; the
   * round goes on after it (and wraps around).
   */
  private async lease(now: Date): Promise<string | null> {
    const until = new Date(now.getTime() + this.options.leaseMs);
    const [row] = await this.options.sql<{ position: string }[]>`
      INSERT INTO loop_lease (name, holder, held_until) VALUES (${leaseName}, ${this.holder}, ${until})
      ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, held_until = excluded.held_until
      WHERE loop_lease.held_until <= ${now} OR loop_lease.holder = ${this.holder}
      RETURNING position`;
    return row ? row.position || first : null;
  }

  /**
   * One round: asks Temporal to start each workflow (most are running already). A failed start ends the
   * round with the error, the executions after it left for the next round; `full` when the batch was.
   */
  async round(): Promise<{ full: boolean }> {
    const { sql, driver, idleMs } = this.options;
    const batch = this.options.batch ?? 200;
    const now = this.options.now();
    const from = await this.lease(now);
    if (from === null) return { full: false };
    const idleSince = new Date(now.getTime() - idleMs);
    // The index execution_unfinished_on_temporal (migration 029) holds exactly these rows.
    const rows = await sql<{ id: string; task_id: string }[]>`
      SELECT e.id, e.task_id FROM execution e
      JOIN task t ON t.current_execution_id = e.id
      WHERE e.snapshot->>'engine' = 'temporal'
        AND e.status NOT IN ('SUCCEEDED', 'FAILED', 'TIMED_OUT', 'CANCELLED')
        AND e.id > ${from} AND e.updated_at <= ${idleSince}
      ORDER BY e.id LIMIT ${batch}`;
    let reached = from;
    try {
      for (const row of rows) {
        await driver.start({ taskId: row.task_id, executionId: row.id });
        reached = row.id;
      }
      if (rows.length < batch) reached = first;
    } finally {
      await sql`UPDATE loop_lease SET position = ${reached} WHERE name = ${leaseName} AND holder = ${this.holder}`;
    }
    return { full: rows.length === batch };
  }
}
