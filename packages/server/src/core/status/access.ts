/**
 * Who may see a task besides its application: ACL grants and revocations, each written with the
 * projection that tells the principal's channel at once (the task's summary, or a removal tombstone);
 * and external references, an application's own names for its tasks.
 */
import type { AclGrantRequest } from '@tdp/protocol';
import { aclChannel, summaryPayload } from '../facts/projections.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { AppError } from '../shared/errors.ts';
import { type ReadDeps, readableTask } from './reads.ts';

/**
 * Grants a principal access; its summary channel gets the task's current summary at once, with the
 * entry's new ACL version: a client that saw the revoke this grant undoes orders the grant after it
 * (the task's version may not have moved in between).
 */
export async function grantAccess(
  deps: ReadDeps,
  principal: ApplicationPrincipal,
  taskId: string,
  request: AclGrantRequest,
) {
  const state = await readableTask(deps, principal, taskId);
  const now = deps.clock.now();
  await deps.reads.grantAcl(
    taskId,
    {
      principalType: request.principalType,
      principalId: request.principalId,
      permission: request.permission ?? 'VIEW',
    },
    now,
    (aclVersion) => [
      {
        id: deps.ids.newId(),
        tenantId: state.task.tenantId,
        aggregateType: 'TASK',
        aggregateId: taskId,
        aggregateVersion: state.task.version,
        channel: aclChannel(
          state.task.tenantId,
          state.task.applicationId,
          request.principalType,
          request.principalId,
        ),
        projection: 'USER_SUMMARY',
        payload: { ...summaryPayload(state, null), aclVersion: aclVersion.toString() },
        createdAt: now,
      },
    ],
  );
}

/**
 * Revokes access; the principal's channel gets a removal tombstone (same transaction) so clients drop the
 * task. It carries the entry's new ACL version, which a later re-grant's summary exceeds. Then every
 * replica hears of it: live detail subscriptions and watch sets of whoever no longer sees the task end.
 */
export async function revokeAccess(
  deps: ReadDeps,
  principal: ApplicationPrincipal,
  taskId: string,
  principalType: 'USER' | 'PROJECT' | 'ROLE',
  principalId: string,
) {
  const state = await readableTask(deps, principal, taskId);
  const now = deps.clock.now();
  const tombstone = (aclVersion: bigint) => ({
    id: deps.ids.newId(),
    tenantId: state.task.tenantId,
    aggregateType: 'TASK' as const,
    aggregateId: taskId,
    aggregateVersion: state.task.version,
    channel: aclChannel(state.task.tenantId, state.task.applicationId, principalType, principalId),
    projection: 'USER_REMOVAL' as const,
    payload: {
      kind: 'task.removed',
      schemaVersion: 1,
      taskId,
      taskVersion: state.task.version.toString(),
      aclVersion: aclVersion.toString(),
    },
    createdAt: now,
  });
  if (!(await deps.reads.revokeAcl(taskId, principalType, principalId, now, (v) => [tombstone(v)]))) {
    throw new AppError(
      'VALIDATION_FAILED',
      `${principalType} ${principalId} has no access to task ${taskId}`,
    );
  }
  await deps.revocations?.announce({
    kind: 'taskAccess',
    tenantId: state.task.tenantId,
    applicationId: state.task.applicationId,
    taskId,
    principalType,
    principalId,
  });
}

export async function attachExternalRef(
  deps: ReadDeps,
  principal: ApplicationPrincipal,
  taskId: string,
  refType: string,
  refValue: string,
) {
  await readableTask(deps, principal, taskId);
  const owner = await deps.reads.attachExternalRef(
    principal.applicationId,
    refType,
    refValue,
    taskId,
    deps.clock.now(),
  );
  if (owner !== taskId)
    throw new AppError('IDEMPOTENCY_KEY_REUSED', `${refType}:${refValue} already refers to task ${owner}`);
}
