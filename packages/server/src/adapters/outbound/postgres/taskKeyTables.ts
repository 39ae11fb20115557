import { singletonPool, type TaskKeySlot, type TaskKeySlotKind } from '../../../core/facts/ports.ts';
import type { Queryable, TxSql } from './database.ts';
import type { MergedWrites } from './mergeWrites.ts';
import type { RowStatement } from './recordset.ts';

/**
 * The holder of an application's debounce or singleton key, the key locked until commit first: a
 * concurrent create with the same key waits here for this transaction to end, then reads what it wrote.
 * An advisory lock, not a row lock, because the first create of a key has no row to lock.
 */
export async function lockTaskKeySlot(
  sql: TxSql,
  kind: TaskKeySlotKind,
  applicationId: string,
  key: string,
): Promise<TaskKeySlot | null> {
  await sql`SELECT pg_advisory_xact_lock(hashtext(${`task-key:${kind}:${applicationId}:${key}`}))`;
  const [row] = await sql<{ task_id: string; window_ends_at: Date | null }[]>`
    SELECT task_id, window_ends_at FROM task_key_slot
    WHERE application_id = ${applicationId} AND kind = ${kind} AND key = ${key}`;
  return row ? { taskId: row.task_id, windowEndsAt: row.window_ends_at } : null;
}

/** Makes `taskId` the key's holder (the key locked by `lockTaskKeySlot` in this transaction). */
export async function setTaskKeySlot(
  sql: TxSql,
  kind: TaskKeySlotKind,
  applicationId: string,
  key: string,
  slot: TaskKeySlot,
  at: Date,
): Promise<void> {
  await sql`
    INSERT INTO task_key_slot (application_id, kind, key, task_id, window_ends_at, updated_at)
    VALUES (${applicationId}, ${kind}, ${key}, ${slot.taskId}, ${slot.windowEndsAt}, ${at})
    ON CONFLICT (application_id, kind, key) DO UPDATE
      SET task_id = EXCLUDED.task_id, window_ends_at = EXCLUDED.window_ends_at, updated_at = EXCLUDED.updated_at`;
}

const finishedStatuses = ['SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];

/**
 * A waiting singleton task's placement (`FactTransaction.takeSingleton`): the key locked as a create
 * locks it, then taken unless another unfinished task holds it (a holder archived since holds nothing).
 * The holder and its state are read in one statement, so a holder finishing meanwhile (whose commit
 * hands the key on, below) is seen either before, or after with the new holder.
 */
export async function takeSingleton(
  sql: TxSql,
  applicationId: string,
  key: string,
  taskId: string,
  at: Date,
): Promise<{ heldBy: string } | null> {
  await sql`SELECT pg_advisory_xact_lock(hashtext(${`task-key:singleton:${applicationId}:${key}`}))`;
  const [slot] = await sql<{ task_id: string; lifecycle_status: string | null }[]>`
    SELECT k.task_id, t.lifecycle_status FROM task_key_slot k LEFT JOIN task t ON t.id = k.task_id
    WHERE k.application_id = ${applicationId} AND k.kind = 'singleton' AND k.key = ${key}`;
  if (slot?.task_id === taskId) return null;
  if (slot?.lifecycle_status && !finishedStatuses.includes(slot.lifecycle_status))
    return { heldBy: slot.task_id };
  await setTaskKeySlot(sql, 'singleton', applicationId, key, { taskId, windowEndsAt: null }, at);
  return null;
}

/**
 * The first task waiting for the singleton key of `s` (its parked requests, by `order_at`): the holder's
 * own parked steps first (`s.holder`, the recheck's), which would pass.
 */
const firstWaitingTask = (exclude: string) => `(
  SELECT task_id FROM scheduling_request
  WHERE status = 'PENDING' AND parked_key = '${singletonPool}'
    AND tenant_id = s.tenant_id AND parked_value = s.key AND application_id = s.application_id
    ${exclude}
  ORDER BY task_id IS NOT DISTINCT FROM s.holder DESC, order_at, task_id LIMIT 1)`;

/**
 * That task's parked requests, with SKIP LOCKED (a round holding one parked it meanwhile: the recheck
 * catches it). All of them, so its root steps start together.
 */
const firstWaiting = (slots: string, exclude: string) => `
  SELECT r.id FROM ${slots}
  CROSS JOIN LATERAL (
    SELECT id FROM scheduling_request
    WHERE status = 'PENDING' AND parked_key = '${singletonPool}'
      AND tenant_id = s.tenant_id AND parked_value = s.key AND application_id = s.application_id
      AND task_id = ${firstWaitingTask(exclude)}
    FOR UPDATE SKIP LOCKED) AS r`;

const writtenTasks = `jsonb_to_recordset($1::text::jsonb) AS x(task_id uuid, tenant_id uuid, finished boolean, at timestamptz)`;
const notWritten = `AND task_id <> ALL(ARRAY(SELECT x.task_id FROM ${writtenTasks}))`;
/** The singleton keys held by the written tasks that finished. */
const freedKeys = `(SELECT held.application_id, held.key, x.tenant_id, NULL::uuid AS holder, x.at
  FROM task_key_slot held JOIN ${writtenTasks} ON held.task_id = x.task_id AND x.finished
  WHERE held.kind = 'singleton') AS s`;

/**
 * When a written task that holds a singleton key finishes, its commit hands the key to the first task
 * waiting for it and lets that task's parked steps in (due now). Two statements of the commit's one
 * (recordset.ts), which both read the rows as they were before it, so they choose the same task. The
 * requests of tasks this commit writes are left to the recheck (the commit may be closing them).
 */
const handOverText = `UPDATE task_key_slot k SET task_id = next.task_id, updated_at = next.at
  FROM (SELECT s.application_id, s.key, s.at, ${firstWaitingTask(notWritten)} AS task_id FROM ${freedKeys}) AS next
  WHERE k.kind = 'singleton' AND k.application_id = next.application_id AND k.key = next.key
    AND next.task_id IS NOT NULL`;

const unparkText = `UPDATE scheduling_request
  SET parked_key = NULL, parked_value = NULL, parked_limit = NULL,
      available_at = (SELECT min(x.at) FROM ${writtenTasks})
  WHERE id IN (${firstWaiting(freedKeys, notWritten)})`;

export function pushSingletonReleaseStatements(w: MergedWrites, statements: RowStatement[]): void {
  const tasks = [...w.newTasks.map((t) => t.task), ...w.tasks];
  if (!tasks.some((t) => finishedStatuses.includes(t.lifecycleStatus))) return;
  const rows = JSON.stringify(
    tasks.map((t) => ({
      task_id: t.id,
      tenant_id: t.tenantId,
      finished: finishedStatuses.includes(t.lifecycleStatus),
      at: t.updatedAt,
    })),
  );
  statements.push({ text: handOverText, rows }, { text: unparkText, rows });
}

/**
 * The recheck (run with the concurrency keys' `unparkWithRoom`): for each singleton key with parked
 * steps whose holder is finished, gone, or the parked task itself, the first waiting task is let in (its
 * placement takes the key). It catches a holder that finished while a round parking a step of the key
 * had not yet committed, and a step the commit's hand-over skipped.
 */
export async function unparkSingletons(sql: Queryable, now: Date): Promise<number> {
  const result = await sql.unsafe(
    `UPDATE scheduling_request SET parked_key = NULL, parked_value = NULL, parked_limit = NULL, available_at = $1
     WHERE id IN (${firstWaiting(
       `(SELECT DISTINCT p.tenant_id, p.application_id, p.parked_value AS key, h.id AS holder
           FROM scheduling_request p
           LEFT JOIN task_key_slot k
             ON k.application_id = p.application_id AND k.kind = 'singleton' AND k.key = p.parked_value
           LEFT JOIN task h ON h.id = k.task_id
           WHERE p.status = 'PENDING' AND p.parked_key = '${singletonPool}'
             AND (h.id IS NULL OR h.id = p.task_id OR h.lifecycle_status = ANY($2::text[]))) AS s`,
       '',
     )})`,
    [now, finishedStatuses],
  );
  return result.count;
}
