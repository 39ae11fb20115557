/**
 * The operator's drain of one worker session (`POST /admin/v1/workers/{id}:drain`). The session is
 * marked DRAINING, so placement passes it over from this commit on, and gets a durable DRAIN command:
 * the worker finishes its running attempts, takes nothing new and exits; its session ends when its
 * heartbeats stop (the lease reaper). The action is audited with who and why, in the same transaction.
 * Draining a session the operator drained already is idempotent: the same answer, nothing written.
 */
import { newId } from '@tdp/protocol';
import type { OperatorActor, WorkerCommandRecord } from '../facts/records.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock } from '../shared/ports.ts';
import type { OperatorAuditRecord, WorkerStore } from './ports.ts';

export const workerDrainAction = 'WORKER_DRAIN';

export interface DrainWorkerDeps {
  clock: Clock;
  workers: Pick<WorkerStore, 'drainWorker'>;
  /** The command was committed: open streams in this process send it now. */
  delivered: (commands: WorkerCommandRecord[]) => void;
  /** Where steps may go changed. */
  workersChanged: () => void;
}

export async function drainWorkerSession(
  deps: DrainWorkerDeps,
  request: { workerId: string; reason: string; actor: OperatorActor },
): Promise<{ workerId: string; commandId: string; auditId: string }> {
  const now = deps.clock.now();
  const command: WorkerCommandRecord = {
    id: newId(),
    workerId: request.workerId,
    type: 'DRAIN',
    payload: {},
    createdAt: now,
  };
  const audit: OperatorAuditRecord = {
    id: newId(),
    action: workerDrainAction,
    subjectId: request.workerId,
    actor: request.actor,
    reason: request.reason,
    details: { commandId: command.id },
    createdAt: now,
  };
  const outcome = await deps.workers.drainWorker(command, audit);
  if (!outcome) throw new AppError('WORKER_NOT_FOUND', `no live worker session ${request.workerId}`);
  // A repeated drain wrote nothing: its first command is on its way already.
  if (!outcome.repeated) {
    deps.delivered([command]);
    deps.workersChanged();
  }
  return { workerId: request.workerId, commandId: outcome.commandId, auditId: outcome.auditId };
}
