/** The commands the server sends a worker (worker_command): new commands and the worker's acknowledgements. */
import type { MergedWrites } from './mergeWrites.ts';
import { type Column, insertStatement, type RowStatement, updateStatement } from './recordset.ts';

const workerCommandColumns: Column[] = [
  ['id', 'uuid'],
  ['worker_id', 'uuid'],
  ['type', 'text'],
  ['payload', 'jsonb'],
  ['created_at', 'timestamptz'],
];

const commandAckColumns: Column[] = [
  ['id', 'uuid'],
  ['worker_id', 'uuid'],
  ['acked_at', 'timestamptz'],
];

/** New commands, then acknowledgements (an acknowledged command keeps its first acked_at). */
export function pushWorkerCommandStatements(w: MergedWrites, statements: RowStatement[]): void {
  if (w.workerCommands.length > 0) {
    statements.push(
      insertStatement(
        'worker_command',
        workerCommandColumns,
        w.workerCommands.map((c) => ({
          id: c.id,
          worker_id: c.workerId,
          type: c.type,
          payload: c.payload,
          created_at: c.createdAt,
        })),
      ),
    );
  }
  if (w.commandAcks.size > 0) {
    statements.push(
      updateStatement('worker_command', commandAckColumns, [...w.commandAcks.values()], {
        assignments: 'acked_at = coalesce(worker_command.acked_at, x.acked_at)',
        where: 'worker_command.worker_id = x.worker_id',
      }),
    );
  }
}
