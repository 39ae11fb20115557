/** Signals sent to tasks (`task_signal`): kept until a signal step of the same name takes one. */
import type { SignalRecord } from '../../../core/facts/records.ts';
import type { TxSql } from './database.ts';

export async function insertSignal(
  sql: TxSql,
  signal: SignalRecord,
  consumed: { stepId: string; at: Date } | null,
): Promise<void> {
  await sql`
    INSERT INTO task_signal (id, task_id, name, payload, consumed_by_step, consumed_at, created_at)
    VALUES (${signal.id}, ${signal.taskId}, ${signal.name}, ${sql.json(signal.payload as never)},
            ${consumed?.stepId ?? null}, ${consumed?.at ?? null}, ${signal.createdAt})`;
}

/** The oldest signal of this name not yet taken, now taken by `stepId`. The task's lock orders takers. */
export async function takeSignal(
  sql: TxSql,
  taskId: string,
  name: string,
  stepId: string,
  at: Date,
): Promise<SignalRecord | null> {
  const [row] = await sql<{ id: string; payload: unknown; created_at: Date }[]>`
    UPDATE task_signal SET consumed_by_step = ${stepId}, consumed_at = ${at}
    WHERE id = (
      SELECT id FROM task_signal
      WHERE task_id = ${taskId} AND name = ${name} AND consumed_at IS NULL
      ORDER BY created_at, id LIMIT 1)
    RETURNING id, payload, created_at`;
  return row ? { id: row.id, taskId, name, payload: row.payload, createdAt: row.created_at } : null;
}
