/**
 * The retention sweep's SQL (core/retention/ports.ts): task batches claimed by row, the other tables
 * walked by heap block ranges (TID range scans need no index, so the write path pays nothing), each
 * range claimed by locking its table's cursor row FOR UPDATE SKIP LOCKED.
 */
import type { DeletePolicy, TaskHistoryTable } from '../../../core/retention/policy.ts';
import { cutoff, taskHistoryTables } from '../../../core/retention/policy.ts';
import {
  type ArchiveBatch,
  type ArchivedTasks,
  type ArchivedTaskTombstone,
  HistoryChanged,
  type RetentionStore,
  type TableLines,
} from '../../../core/retention/ports.ts';
import { type Queryable, type Sql, type TxSql, transaction } from './database.ts';

const terminal = `('SUCCEEDED', 'FAILED', 'TIMED_OUT', 'CANCELLED')`;

/** How each history table's rows of a set of tasks ($1, uuid[]) are found, and their key order. */
const history: Record<TaskHistoryTable, { where: string; orderBy: string }> = {
  task: { where: 'id = ANY($1::uuid[])', orderBy: 'id' },
  execution: { where: 'task_id = ANY($1::uuid[])', orderBy: 'id' },
  step: { where: 'task_id = ANY($1::uuid[])', orderBy: 'id' },
  attempt: { where: 'task_id = ANY($1::uuid[])', orderBy: 'id' },
  access_grant: {
    where: 'attempt_id IN (SELECT id FROM attempt WHERE task_id = ANY($1::uuid[]))',
    orderBy: 'id',
  },
  map_item: {
    where: 'step_id IN (SELECT id FROM step WHERE task_id = ANY($1::uuid[]))',
    orderBy: 'step_id, item_index',
  },
  task_event: { where: 'task_id = ANY($1::uuid[])', orderBy: 'id' },
  event_dedup: { where: 'task_id = ANY($1::uuid[])', orderBy: 'event_id' },
  timeline: { where: 'task_id = ANY($1::uuid[])', orderBy: 'position' },
  task_acl: { where: 'task_id = ANY($1::uuid[])', orderBy: 'task_id, principal_type, principal_id' },
  task_external_ref: { where: 'task_id = ANY($1::uuid[])', orderBy: 'application_id, ref_type, ref_value' },
  scheduling_request: { where: 'task_id = ANY($1::uuid[])', orderBy: 'id' },
  timer: { where: 'task_id = ANY($1::uuid[])', orderBy: 'id' },
  callback_delivery: { where: 'task_id = ANY($1::uuid[])', orderBy: 'id' },
  task_signal: { where: 'task_id = ANY($1::uuid[])', orderBy: 'id' },
  step_decision: { where: 'task_id = ANY($1::uuid[])', orderBy: 'id' },
  user_notification: { where: 'task_id = ANY($1::uuid[])', orderBy: 'id' },
};

/** Which rows of each delete-only table are done before the cut-off ($1). */
const doneRows: Record<DeletePolicy['table'], string> = {
  outbox_event: `status = 'PUBLISHED' AND published_at < $1`,
  realtime_outbox: `status = 'PUBLISHED' AND published_at < $1`,
  callback_delivery: `status = 'PUBLISHED' AND published_at < $1`,
  idempotency: 'created_at < $1',
  consumer_inbox: 'processed_at < $1',
  worker_command: 'acked_at < $1',
  timer: `status = 'PUBLISHED' AND published_at < $1`,
  access_grant: 'expires_at < $1',
  bulk_job_task: `job_id IN (SELECT id FROM bulk_job WHERE status <> 'RUNNING' AND finished_at < $1)`,
  bulk_job: `status <> 'RUNNING' AND finished_at < $1
             AND NOT EXISTS (SELECT 1 FROM bulk_job_task t WHERE t.job_id = bulk_job.id)`,
};

/** Tables whose oldest row is the one with the lowest (time-ordered) id, and the column that dates it. */
const agedTables: Record<string, string> = {
  task: 'created_at',
  outbox_event: 'created_at',
  realtime_outbox: 'created_at',
  callback_delivery: 'created_at',
  worker_command: 'created_at',
  timer: 'created_at',
  access_grant: 'created_at',
  bulk_job: 'created_at',
};

const tid = (block: number) => `(${block},0)`;

export class PostgresRetentionStore implements RetentionStore, ArchivedTasks {
  constructor(private readonly sql: Sql) {}

  async claimTaskBatch(request: Parameters<RetentionStore['claimTaskBatch']>[0]) {
    return transaction(this.sql, async (tx) => {
      const [abandoned] = await tx<{ id: string; archive_day: string }[]>`
        SELECT id, to_char(archive_day, 'YYYY-MM-DD') AS archive_day FROM retention_batch
        WHERE claimed_until < ${request.now} ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED`;
      if (abandoned) {
        await tx`UPDATE retention_batch SET claim_id = ${request.claimId}, claimed_until = ${request.claimedUntil}
                 WHERE id = ${abandoned.id}`;
        const tasks = await tx<{ task_id: string }[]>`
          SELECT task_id FROM retention_batch_task WHERE batch_id = ${abandoned.id} ORDER BY task_id`;
        const batch: ArchiveBatch = {
          batchId: abandoned.id,
          claimId: request.claimId,
          archiveDay: abandoned.archive_day,
          taskIds: tasks.map((t) => t.task_id),
        };
        return { batch, wrapped: false };
      }
      const range = await claimRange(tx, 'task', request.now, request.scanBlocks);
      if (!range) return { batch: null, wrapped: true };
      // Finished before the cut-off, every execution ended, no callback still to deliver, no child task
      // left (children go first), and not the child of a task still running.
      const found = await tx.unsafe<{ id: string }[]>(
        `SELECT t.id FROM task t JOIN execution e ON e.id = t.current_execution_id
         WHERE t.ctid >= $1::tid AND t.ctid < $2::tid
           AND e.status IN ${terminal}
           AND coalesce(t.finished_at, e.completed_at) < $3
           AND NOT EXISTS (SELECT 1 FROM execution x WHERE x.task_id = t.id AND x.status NOT IN ${terminal})
           AND NOT EXISTS (SELECT 1 FROM retention_batch_task b WHERE b.task_id = t.id)
           AND NOT EXISTS (SELECT 1 FROM task c WHERE c.parent_task_id = t.id)
           AND NOT EXISTS (SELECT 1 FROM task p JOIN execution pe ON pe.id = p.current_execution_id
                           WHERE p.id = t.parent_task_id AND pe.status NOT IN ${terminal})
           AND NOT EXISTS (SELECT 1 FROM callback_delivery d
                           WHERE d.task_id = t.id AND d.status IN ('PENDING', 'PUBLISHING', 'FAILED'))
         ORDER BY t.id LIMIT $4
         FOR UPDATE OF t SKIP LOCKED`,
        [tid(range.from), tid(range.to), request.finishedBefore, request.limit],
      );
      // A full batch may have left tasks in this range: look at it again next time.
      if (found.length < request.limit) await range.advance();
      if (found.length === 0) return { batch: null, wrapped: range.wrapped };
      const taskIds = found.map((r) => r.id).sort();
      await tx`
        INSERT INTO retention_batch (id, archive_day, claim_id, claimed_until, created_at)
        VALUES (${request.batchId}, ${request.archiveDay}, ${request.claimId}, ${request.claimedUntil}, ${request.now})`;
      await tx`
        INSERT INTO retention_batch_task (task_id, batch_id)
        SELECT unnest(${taskIds}::uuid[]), ${request.batchId}`;
      const batch: ArchiveBatch = {
        batchId: request.batchId,
        claimId: request.claimId,
        archiveDay: request.archiveDay,
        taskIds,
      };
      return { batch, wrapped: range.wrapped };
    });
  }

  taskHistory(taskIds: string[]): Promise<TableLines[]> {
    return readHistory(this.sql, taskIds);
  }

  async deleteArchived(
    batch: ArchiveBatch,
    now: Date,
    verify: (current: TableLines[]) => Promise<void>,
  ): Promise<TableLines[]> {
    return transaction(this.sql, async (tx) => {
      const [held] = await tx`
        SELECT 1 FROM retention_batch WHERE id = ${batch.batchId} AND claim_id = ${batch.claimId} FOR UPDATE`;
      if (!held) throw new Error(`batch ${batch.batchId} is no longer this sweeper's`);
      await tx`SELECT id FROM task WHERE id = ANY(${batch.taskIds}::uuid[]) ORDER BY id FOR UPDATE`;
      const current = await readHistory(tx, batch.taskIds);
      await verify(current);
      await tx`
        INSERT INTO archived_task (task_id, tenant_id, application_id, owner_id, batch_id, archive_day,
                                   finished_at, archived_at)
        SELECT id, tenant_id, application_id, owner_id, ${batch.batchId}, ${batch.archiveDay}, finished_at, ${now}
        FROM task WHERE id = ANY(${batch.taskIds}::uuid[])`;
      // Rows found through a step or an attempt go before them. A row that arrived after the read above
      // (one not archived) makes the count differ: the whole delete is rolled back.
      const counted = new Map(current.map((t) => [t.table, t.lines.length]));
      for (const table of [...taskHistoryTables].reverse()) {
        const deleted = await tx.unsafe(`DELETE FROM ${table} WHERE ${history[table].where}`, [
          batch.taskIds,
        ]);
        if (deleted.count !== counted.get(table))
          throw new HistoryChanged(`${table} of batch ${batch.batchId} changed while it was deleted`);
      }
      await tx`DELETE FROM retention_batch WHERE id = ${batch.batchId}`;
      return current;
    });
  }

  async releaseBatch(batchId: string): Promise<void> {
    await this.sql`DELETE FROM retention_batch WHERE id = ${batchId}`;
  }

  async sweepTable(policy: DeletePolicy, now: Date, scanBlocks: number) {
    return transaction(this.sql, async (tx) => {
      const range = await claimRange(tx, policy.table, now, scanBlocks);
      if (!range) return { deleted: 0, wrapped: true };
      const deleted = await tx.unsafe(
        `DELETE FROM ${policy.table} WHERE ctid >= $2::tid AND ctid < $3::tid AND ${doneRows[policy.table]}`,
        [cutoff(now, policy.windowDays), tid(range.from), tid(range.to)],
      );
      await range.advance();
      return { deleted: deleted.count, wrapped: range.wrapped };
    });
  }

  async oldestRowAges(tables: string[], now: Date): Promise<Record<string, number>> {
    const ages: Record<string, number> = {};
    for (const table of tables) {
      const column = agedTables[table];
      if (!column) continue;
      const [row] = await this.sql.unsafe<{ at: Date }[]>(
        `SELECT ${column} AS at FROM ${table} ORDER BY id LIMIT 1`,
      );
      ages[table] = row ? Math.max(0, (now.getTime() - row.at.getTime()) / 1000) : 0;
    }
    return ages;
  }

  async restore(tables: TableLines[], taskIds: string[]): Promise<Record<string, number>> {
    return transaction(this.sql, async (tx) => {
      const restored: Record<string, number> = {};
      const order = new Map(taskHistoryTables.map((t, i) => [t as string, i]));
      const sorted = [...tables].sort((a, b) => (order.get(a.table) ?? 0) - (order.get(b.table) ?? 0));
      for (const { table, lines } of sorted) {
        if (!order.has(table)) throw new Error(`${table} is not a task history table`);
        if (lines.length === 0) continue;
        // A row already there (restored before) is kept: restoring twice changes nothing.
        const inserted = await tx.unsafe(
          `INSERT INTO ${table} SELECT * FROM json_populate_recordset(NULL::${table}, $1::text::json)
           ON CONFLICT DO NOTHING`,
          [`[${lines.join(',')}]`],
        );
        restored[table] = inserted.count;
      }
      await tx`DELETE FROM archived_task WHERE task_id = ANY(${taskIds}::uuid[])`;
      return restored;
    });
  }

  async archivedTask(taskId: string) {
    const found = await this.find(taskId);
    return found ? { batchId: found.batchId, archiveDay: found.archiveDay } : null;
  }

  async find(taskId: string): Promise<ArchivedTaskTombstone | null> {
    const [row] = await this.sql<
      {
        task_id: string;
        tenant_id: string;
        application_id: string;
        owner_id: string | null;
        batch_id: string;
        archive_day: string;
      }[]
    >`SELECT task_id, tenant_id, application_id, owner_id, batch_id,
             to_char(archive_day, 'YYYY-MM-DD') AS archive_day
      FROM archived_task WHERE task_id = ${taskId}`;
    return row
      ? {
          taskId: row.task_id,
          tenantId: row.tenant_id,
          applicationId: row.application_id,
          ownerId: row.owner_id,
          batchId: row.batch_id,
          archiveDay: row.archive_day,
        }
      : null;
  }
}

async function readHistory(sql: Queryable, taskIds: string[]): Promise<TableLines[]> {
  const tables: TableLines[] = [];
  for (const table of taskHistoryTables) {
    const { where, orderBy } = history[table];
    const rows = await sql.unsafe<{ line: string }[]>(
      `SELECT row_to_json(t)::text AS line FROM ${table} t WHERE ${where} ORDER BY ${orderBy}`,
      [taskIds],
    );
    tables.push({ table, lines: rows.map((r) => r.line) });
  }
  return tables;
}

/**
 * The next block range of `table`, claimed by locking its cursor row (null: another sweeper holds it).
 * Past the table's last block the walk starts again at 0 and says it wrapped.
 */
async function claimRange(tx: TxSql, table: string, now: Date, blocks: number) {
  await tx`INSERT INTO retention_cursor (table_name, next_block, updated_at) VALUES (${table}, 0, ${now})
           ON CONFLICT DO NOTHING`;
  const [cursor] = await tx<{ next_block: bigint; table_blocks: bigint }[]>`
    SELECT next_block,
           pg_relation_size(${table}::regclass) / current_setting('block_size')::bigint AS table_blocks
    FROM retention_cursor WHERE table_name = ${table} FOR UPDATE SKIP LOCKED`;
  if (!cursor) return null;
  const tableBlocks = Number(cursor.table_blocks);
  const from = Number(cursor.next_block) >= tableBlocks ? 0 : Number(cursor.next_block);
  const to = from + blocks;
  const wrapped = to >= tableBlocks;
  return {
    from,
    to,
    wrapped,
    advance: async () => {
      await tx`UPDATE retention_cursor SET next_block = ${wrapped ? 0 : to}, updated_at = ${now}
               WHERE table_name = ${table}`;
    },
  };
}
