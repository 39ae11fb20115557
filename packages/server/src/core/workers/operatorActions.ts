/**
 * The operator's actions on where work goes, beside the drain of one session (drainWorker.ts):
 * - node drain: the node is cordoned and each of its live sessions drained (DRAINING, a DRAIN command):
 *   they finish their running attempts and exit; the node takes nothing new, even a session that
 *   registers on it later.
 * - cordon (of a session or a node): placed on no more, nothing sent; the running work goes on.
 *   Uncordon makes it placeable again (a drained session stays DRAINING: it is on its way out).
 * Each call carries a reason and is audited with who and why in the same transaction; a cordon or
 * uncordon asking for the status there is already writes nothing and answers the audit of the one that
 * set it.
 */
import { newId } from '@tdp/protocol';
import type { OperatorActor, WorkerCommandRecord } from '../facts/records.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock } from '../shared/ports.ts';
import type { OperatorAuditRecord, OperatorWorkerStore } from './ports.ts';

export const operatorActions = {
  nodeDrain: 'NODE_DRAIN',
  workerCordon: 'WORKER_CORDON',
  workerUncordon: 'WORKER_UNCORDON',
  nodeCordon: 'NODE_CORDON',
  nodeUncordon: 'NODE_UNCORDON',
} as const;

export interface OperatorActionDeps {
  clock: Clock;
  store: OperatorWorkerStore;
  /** Commands were committed: open streams in this process send them now. */
  delivered: (commands: WorkerCommandRecord[]) => void;
  /** Where steps may go changed. */
  workersChanged: () => void;
}

export interface OperatorRequest {
  reason: string;
  actor: OperatorActor;
}

const auditOf = (
  action: string,
  subjectId: string,
  request: OperatorRequest,
  at: Date,
  details: Record<string, unknown> = {},
): OperatorAuditRecord => ({
  id: newId(),
  action,
  subjectId,
  actor: request.actor,
  reason: request.reason,
  details,
  createdAt: at,
});

export async function drainNode(
  deps: OperatorActionDeps,
  request: OperatorRequest & { nodeId: string },
): Promise<{ nodeId: string; auditId: string; workers: { workerId: string; commandId: string }[] }> {
  const now = deps.clock.now();
  const command = (workerId: string): WorkerCommandRecord => ({
    id: newId(),
    workerId,
    type: 'DRAIN',
    payload: {},
    createdAt: now,
  });
  const outcome = await deps.store.drainNode(
    request.nodeId,
    command,
    auditOf(operatorActions.nodeDrain, request.nodeId, request, now),
  );
  if (!outcome) throw new AppError('NODE_NOT_FOUND', `no node ${request.nodeId}`);
  if (outcome.sent.length > 0) deps.delivered(outcome.sent);
  deps.workersChanged();
  return { nodeId: request.nodeId, auditId: outcome.auditId, workers: outcome.workers };
}

export async function setWorkerCordon(
  deps: OperatorActionDeps,
  request: OperatorRequest & { workerId: string; cordoned: boolean },
): Promise<{ workerId: string; schedulingStatus: 'ELIGIBLE' | 'INELIGIBLE'; auditId: string }> {
  const status = request.cordoned ? 'INELIGIBLE' : 'ELIGIBLE';
  const action = request.cordoned ? operatorActions.workerCordon : operatorActions.workerUncordon;
  const audit = auditOf(action, request.workerId, request, deps.clock.now());
  const change = await deps.store.setWorkerScheduling(request.workerId, status, audit);
  if (!change) throw new AppError('WORKER_NOT_FOUND', `no live worker session ${request.workerId}`);
  if (!change.repeated) deps.workersChanged();
  return { workerId: request.workerId, schedulingStatus: status, auditId: change.auditId };
}

export async function setNodeCordon(
  deps: OperatorActionDeps,
  request: OperatorRequest & { nodeId: string; cordoned: boolean },
): Promise<{ nodeId: string; status: 'ACTIVE' | 'CORDONED'; auditId: string }> {
  const status = request.cordoned ? 'CORDONED' : 'ACTIVE';
  const action = request.cordoned ? operatorActions.nodeCordon : operatorActions.nodeUncordon;
  const audit = auditOf(action, request.nodeId, request, deps.clock.now());
  const change = await deps.store.setNodeStatus(request.nodeId, status, audit);
  if (!change) throw new AppError('NODE_NOT_FOUND', `no node ${request.nodeId}`);
  if (!change.repeated) deps.workersChanged();
  return { nodeId: request.nodeId, status, auditId: change.auditId };
}
