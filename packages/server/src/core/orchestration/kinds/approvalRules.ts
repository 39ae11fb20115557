/**
 * The rules of an approval step, pure: who may decide, what the decisions so far add up to, who is
 * given access to see the task, and whose summary channels are told that the task needs them. The use cases are in approval.ts.
 */
import type { ApprovalDecision, ApprovalOptions } from '@tdp/protocol';
import { aclChannel, channels, summaryChannels } from '../../facts/projections.ts';
import type { AclEntry, OperatorActor, TaskState } from '../../facts/records.ts';
import { type Refusal, refuse } from '../../facts/stateMachine.ts';

/** Who asks to decide: a user (from a user token) or the operator (dashboard or admin API). */
export type Decider =
  | { kind: 'user'; userId: string; roles: string[]; projects: string[] }
  | { kind: 'operator'; reason: string; actor: OperatorActor };

const operatorKey = 'operator';

/** The key of a decider in the decisions (one decision per key and step attempt). */
export const deciderKey = (decider: Decider) =>
  decider.kind === 'operator' ? operatorKey : `user:${decider.userId}`;

/** Whether the user sees the task at all: its owner, or a principal of its ACL (as every read). */
export function canSee(task: TaskState['task'], acl: AclEntry[], decider: Decider): boolean {
  if (decider.kind === 'operator') return true;
  if (task.ownerId !== null && task.ownerId === decider.userId) return true;
  return acl.some(
    (e) =>
      (e.principalType === 'USER' && e.principalId === decider.userId) ||
      (e.principalType === 'ROLE' && decider.roles.includes(e.principalId)) ||
      (e.principalType === 'PROJECT' && decider.projects.includes(e.principalId)),
  );
}

/**
 * Whether the decider may decide: the operator always; a user named by the approvers (as a user, or
 * through one of their token's roles or projects), or the owner when the approvers include the owner.
 * The task's submitter (its owner) may not decide through the lists unless `allowSubmitter`.
 */
export function mayDecide(
  options: ApprovalOptions,
  task: TaskState['task'],
  decider: Decider,
): Refusal | null {
  if (decider.kind === 'operator') return null;
  const isOwner = task.ownerId !== null && task.ownerId === decider.userId;
  if (isOwner && options.approvers.owner === true) return null;
  const { users = [], roles = [], projects = [] } = options.approvers;
  const listed =
    users.includes(decider.userId) ||
    decider.roles.some((r) => roles.includes(r)) ||
    decider.projects.some((p) => projects.includes(p));
  if (listed && (!isOwner || options.allowSubmitter === true)) return null;
  return refuse(
    'NOT_AN_APPROVER',
    isOwner && listed
      ? 'you submitted this task, and this approval does not let its submitter decide'
      : 'you are not one of the approvers of this step',
  );
}

export type ApprovalOutcome = 'PENDING' | 'APPROVED' | 'REJECTED';

/**
 * One rejection rejects; `required` approvals approve; otherwise the step keeps waiting. The operator's
 * approval settles it alone (an override, with its reason).
 */
export function tally(
  required: number,
  decisions: Pick<ApprovalDecision, 'decision' | 'decidedBy'>[],
): ApprovalOutcome {
  if (decisions.some((d) => d.decision === 'REJECT')) return 'REJECTED';
  if (decisions.some((d) => d.decision === 'APPROVE' && d.decidedBy === operatorKey)) return 'APPROVED';
  const approvals = decisions.filter((d) => d.decision === 'APPROVE').length;
  return approvals >= Math.max(1, required) ? 'APPROVED' : 'PENDING';
}

/**
 * The summary channels that get the action notice: those of the approvers that see the task's summary
 * at all (its owner and its ACL), each once.
 */
export function approverChannels(options: ApprovalOptions, state: TaskState, acl: AclEntry[]): string[] {
  const { tenantId, applicationId, ownerId } = state.task;
  const { users = [], roles = [], projects = [] } = options.approvers;
  const wanted = new Set<string>([
    ...users
      .filter((u) => u !== ownerId || options.allowSubmitter === true)
      .map((u) => channels.user(tenantId, applicationId, u)),
    ...roles.map((r) => aclChannel(tenantId, applicationId, 'ROLE', r)),
    ...projects.map((p) => aclChannel(tenantId, applicationId, 'PROJECT', p)),
    ...(ownerId && options.approvers.owner === true ? [channels.user(tenantId, applicationId, ownerId)] : []),
  ]);
  return summaryChannels(state, acl).filter((c) => wanted.has(c));
}

/**
 * The VIEW grants that let every approver named by user, role or project see the task while it waits
 * for them: those the task's owner and ACL do not reach already. Naming someone an approver is enough;
 * without these, the person asked to decide would get 404 for the task they were asked about.
 */
export function approverGrants(
  options: ApprovalOptions,
  task: TaskState['task'],
  acl: AclEntry[],
): AclEntry[] {
  const { users = [], roles = [], projects = [] } = options.approvers;
  const named: AclEntry[] = [
    ...users.filter((u) => u !== task.ownerId).map((u) => view('USER', u)),
    ...roles.map((r) => view('ROLE', r)),
    ...projects.map((p) => view('PROJECT', p)),
  ];
  const seen = new Set(acl.map((e) => `${e.principalType}:${e.principalId}`));
  return named.filter((e) => {
    const key = `${e.principalType}:${e.principalId}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

const view = (principalType: AclEntry['principalType'], principalId: string): AclEntry => ({
  principalType,
  principalId,
  permission: 'VIEW',
});
