/**
 * The operator's requeue of dead letters (`POST /admin/v1/dead-letters:requeue`): DEAD rows of the
 * domain outbox, the realtime relay or the callbacks go back to be sent now, as
 * `POST /v1/callbacks/{id}:redeliver` puts one back — those named by id, or the oldest that match a
 * filter (all DEAD rows without one), at most `requeueLimit` per call. The action is audited with who,
 * why, what was asked and which rows moved; the table's loop is woken so they go at once.
 */
import { newId } from '@tdp/protocol';
import type { OperatorActor } from '../facts/records.ts';
import type { Clock } from '../shared/ports.ts';
import type { DeadLetterSelection, DeadLetters, DeadLetterTable } from './ports.ts';

export const deadLettersRequeueAction = 'DEAD_LETTERS_REQUEUE';

export interface RequeueDeps {
  clock: Clock;
  deadLetters: DeadLetters;
  /** At most this many rows are requeued by one call. */
  requeueLimit: number;
  /** Rows of the table were put back: its loop sends them now. */
  requeued: (table: DeadLetterTable) => void;
}

export async function requeueDeadLetters(
  deps: RequeueDeps,
  request: { table: DeadLetterTable; selection: DeadLetterSelection; reason: string; actor: OperatorActor },
): Promise<{ table: DeadLetterTable; requeued: string[]; auditId: string }> {
  const now = deps.clock.now();
  const { ids, filter } = request.selection;
  const audit = {
    id: newId(),
    action: deadLettersRequeueAction,
    subjectId: request.table,
    actor: request.actor,
    reason: request.reason,
    details: { requested: ids ?? null, filter: filter ?? null },
    createdAt: now,
  };
  const requeued = await deps.deadLetters.requeueDead(
    request.table,
    request.selection,
    Math.min(ids?.length ?? deps.requeueLimit, deps.requeueLimit),
    audit,
    now,
  );
  if (requeued.length > 0) deps.requeued(request.table);
  return { table: request.table, requeued, auditId: audit.id };
}
