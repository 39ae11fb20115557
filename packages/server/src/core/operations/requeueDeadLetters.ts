/**
 * The operator's requeue of dead letters (`POST /admin/v1/dead-letters:requeue`): DEAD rows go back to
 * be sent now, as `POST /v1/callbacks/{id}:redeliver` puts one back, and the action is audited with who,
 * why and which rows. Only the callbacks table so far; the outbox and relay tables come next.
 */
import { newId } from '@tdp/protocol';
import type { Clock } from '../shared/ports.ts';
import type { CallbackDeliveries } from './ports.ts';

export const deadLettersRequeueAction = 'DEAD_LETTERS_REQUEUE';

export interface RequeueDeps {
  clock: Clock;
  callbacks: Pick<CallbackDeliveries, 'requeueDead'>;
  /** At most this many rows are requeued by one call that names no ids. */
  requeueLimit: number;
}

export async function requeueDeadLetters(
  deps: RequeueDeps,
  request: { table: 'callbacks'; ids: string[] | null; reason: string; actor: string },
): Promise<{ table: 'callbacks'; requeued: string[]; auditId: string }> {
  const now = deps.clock.now();
  const audit = {
    id: newId(),
    action: deadLettersRequeueAction,
    subjectId: request.table,
    actor: request.actor,
    reason: request.reason,
    createdAt: now,
  };
  const requeued = await deps.callbacks.requeueDead(
    request.ids,
    request.ids ? request.ids.length : deps.requeueLimit,
    audit,
    now,
  );
  return { table: request.table, requeued, auditId: audit.id };
}
