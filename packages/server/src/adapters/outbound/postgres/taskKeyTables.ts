import type { TaskKeySlot, TaskKeySlotKind } from '../../../core/facts/ports.ts';
import type { TxSql } from './database.ts';

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
