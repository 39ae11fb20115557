/** `tdp archive restore --task <id>`: one archived task's history back in the database, row for row. */
import { AppError } from '../shared/errors.ts';
import type { ArchiveWriter, RetentionStore, TableLines } from './ports.ts';

export interface RestoreReport {
  taskId: string;
  batchId: string;
  archiveDay: string;
  /** Rows put back per table (a row already present is not counted). */
  restored: Record<string, number>;
}

export async function restoreTask(
  deps: { store: RetentionStore; archive: ArchiveWriter },
  taskId: string,
): Promise<RestoreReport> {
  const tombstone = await deps.store.archivedTask(taskId);
  if (!tombstone) throw new AppError('TASK_NOT_FOUND', `task ${taskId} is not archived`);
  const { tables } = await deps.archive.read(tombstone.archiveDay, tombstone.batchId);
  const restored = await deps.store.restore(linesOfTask(tables, taskId), [taskId]);
  return { taskId, ...tombstone, restored };
}

/** The lines of one task among a batch's: its own rows, and the items and grants of its steps and attempts. */
export function linesOfTask(tables: TableLines[], taskId: string): TableLines[] {
  const rowsOf = (table: string) =>
    (tables.find((t) => t.table === table)?.lines ?? []).map((line) => ({
      line,
      row: JSON.parse(line) as Record<string, unknown>,
    }));
  const stepIds = new Set(
    rowsOf('step')
      .filter((r) => r.row.task_id === taskId)
      .map((r) => r.row.id),
  );
  const attemptIds = new Set(
    rowsOf('attempt')
      .filter((r) => r.row.task_id === taskId)
      .map((r) => r.row.id),
  );
  const belongs = (table: string, row: Record<string, unknown>): boolean => {
    if (table === 'task') return row.id === taskId;
    if (table === 'map_item') return stepIds.has(row.step_id);
    if (table === 'access_grant') return attemptIds.has(row.attempt_id);
    return row.task_id === taskId;
  };
  return tables.map(({ table }) => ({
    table,
    lines: rowsOf(table)
      .filter((r) => belongs(table, r.row))
      .map((r) => r.line),
  }));
}
