/**
 * Approval steps (`kind: "approval"`): the step waits for people.
 * - begin: the step waits with `waitingFor: { kind: 'approval', approvers, required, decisions, since,
 *   timeoutAt? }`; an unclassified task's business status is WAITING_USER_ACTION while it waits
 *   (stateMachine.ts); the approvers' summary channels get a notice with `requiresAction: true` with
 *   this fact only (each approver sees it once); a timeout timer is set if asked.
 * - a decision (`POST /v1/tasks/{id}/steps/{key}:approve` / `:reject`, or the operator's): an immutable
 *   `step_decision` row and its fact, then — enough approvals — the step succeeds with `{ decisions }`,
 *   or — a rejection — it fails APPROVAL_REJECTED (not retryable), all in one transaction.
 * - the timeout applies `onTimeout`: REJECT (fails APPROVAL_REJECTED), FAIL (fails APPROVAL_TIMED_OUT)
 *   or CONTINUE (succeeds with `{ decisions, timedOut: true }`).
 * A request repeated with its Idempotency-Key gets its first answer back; refusals change nothing.
 */
import type {
  ApprovalDecision,
  ApprovalOptions,
  StepDecisionView,
  StepDefinition,
  WaitingFor,
} from '@tdp/protocol';
import type { JsonSchemaValidator } from '../../definitions/ports.ts';
import { isTerminal } from '../../facts/execution.ts';
import { operatorNamed, operatorProducer, operatorTaskActions } from '../../facts/operatorActor.ts';
import type { AclEntry, StepDecisionRecord, StepRecord, TaskState } from '../../facts/records.ts';
import { type FactSession, inFactTransaction } from '../../facts/session.ts';
import { taskAfterStepChange } from '../../facts/stateMachine.ts';
import { type UserReach, withinReach } from '../../identity/userReach.ts';
import { fingerprint } from '../../shared/canonicalJson.ts';
import { AppError } from '../../shared/errors.ts';
import { type ConsequenceDeps, type FactConsequenceDeps, failStepAttempt } from '../consequences.ts';
import { milestone } from '../transitionRecords.ts';
import {
  approverChannels,
  approverGrants,
  canSee,
  type Decider,
  deciderKey,
  mayDecide,
  tally,
} from './approvalRules.ts';
import { completePlatformStep, stepTimer, stillWaiting, waitOnStep } from './finishStep.ts';

const principalName = (e: AclEntry) => `${e.principalType.toLowerCase()} ${e.principalId}`;

export type ApprovalWaiting = Extract<WaitingFor, { kind: 'approval' }>;

const optionsOf = (state: TaskState, step: StepRecord): ApprovalOptions | null => {
  const definition = state.execution.snapshot.steps.find((d) => d.key === step.key);
  return definition?.kind === 'approval' && definition.approval ? definition.approval : null;
};

const waitingApproval = (step: StepRecord | undefined): ApprovalWaiting | null =>
  stillWaiting(step, 'approval') && step.waitingFor?.kind === 'approval' ? step.waitingFor : null;

/** The approval step begins: it waits for its approvers, who are told once. */
export async function beginApproval(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  definition: StepDefinition,
): Promise<void> {
  const options = definition.approval!;
  const now = session.now;
  const timeoutAt = options.timeoutMs !== undefined ? new Date(now.getTime() + options.timeoutMs) : null;
  const waitingFor: ApprovalWaiting = {
    kind: 'approval',
    approvers: options.approvers,
    required: options.required ?? 1,
    decisions: [],
    since: now.toISOString(),
    ...(timeoutAt ? { timeoutAt: timeoutAt.toISOString() } : {}),
  };
  const aclBefore = before.acl ?? (await session.tx.acl(before.task.id));
  const grants = approverGrants(options, before.task, aclBefore);
  const acl = [...aclBefore, ...grants];
  const version = before.task.version + 1n;
  await waitOnStep(deps, session, before, step, waitingFor, {
    producer: 'tdp:timer',
    milestone: 'WAITING_FOR_APPROVAL',
    message:
      `step ${step.key} waits for ${waitingFor.required} approval(s)` +
      (grants.length > 0 ? `; ${grants.map(principalName).join(', ')} may now see the task` : ''),
    ...(grants.length > 0
      ? {
          // Recorded with the fact: who was given access, and why.
          payload: { accessGranted: grants },
          write: { aclGrants: { taskId: before.task.id, entries: grants, createdAt: now } },
        }
      : {}),
    timers: timeoutAt ? [stepTimer(deps, before, step, 'APPROVAL_TIMEOUT', timeoutAt, now)] : [],
    // Only with this fact: each approver is asked once, not again with every later change.
    channelNotice: {
      notice: {
        id: `${before.task.id}:${version}`,
        kind: 'ACTION_REQUIRED',
        severity: 'ACTION_REQUIRED',
        message: `${before.task.name}: waiting for your approval (${step.displayName ?? step.key})`,
        requiresAction: true,
      },
      channels: approverChannels(options, before, acl),
    },
  });
}

export interface DecisionRequest {
  taskId: string;
  stepKey: string;
  decision: 'APPROVE' | 'REJECT';
  comment?: string | undefined;
  data?: unknown;
  idempotencyKey: string;
}

export type ApprovalDeps = FactConsequenceDeps & { schemas: JsonSchemaValidator };

/** Who decides and, for a user, the reach of the token they came with (null: the operator). */
export interface DecidingParty {
  decider: Decider;
  reach: UserReach | null;
}

export function decisionView(d: StepDecisionRecord): StepDecisionView {
  return {
    decisionId: d.id,
    taskId: d.taskId,
    stepKey: d.stepKey,
    stepAttempt: d.stepAttempt,
    decision: d.decision,
    decidedBy: d.decidedBy,
    comment: d.comment,
    data: d.data ?? null,
    ...(d.reason !== null ? { reason: d.reason } : {}),
    outcome: d.outcome,
    taskVersion: d.taskVersion.toString(),
    decidedAt: d.decidedAt.toISOString(),
  };
}

/** The decision; `replayed` when it is the first answer again (a retry, or the same decision again). */
interface Decided {
  replayed: boolean;
  view: StepDecisionView;
}

/**
 * Records one decision on an approval step and what follows from it. Refusals (each with its own code)
 * change nothing; the same request with the same key, or the same decision again, gets the first answer.
 */
export async function decideApproval(
  deps: ApprovalDeps,
  party: DecidingParty,
  request: DecisionRequest,
): Promise<Decided> {
  const { decider, reach } = party;
  const by = deciderKey(decider);
  const requestHash = fingerprint({
    stepKey: request.stepKey,
    decision: request.decision,
    comment: request.comment ?? null,
    data: request.data ?? null,
    reason: decider.kind === 'operator' ? decider.reason : null,
  });
  return inFactTransaction(deps, async (session) => {
    const before = await session.lockTask(request.taskId);
    const acl = before ? (before.acl ?? (await session.tx.acl(before.task.id))) : [];
    if (!before || (reach && !withinReach(reach, before.task)) || !canSee(before.task, acl, decider))
      throw new AppError('TASK_NOT_FOUND', `task ${request.taskId} does not exist`);
    const mine = await session.tx.findStepDecisions(before.task.id, by);
    const retried = mine.find((d) => d.idempotencyKey === request.idempotencyKey);
    if (retried) {
      if (retried.requestHash !== requestHash)
        throw new AppError(
          'IDEMPOTENCY_KEY_REUSED',
          `Idempotency-Key "${request.idempotencyKey}" was used for a different decision; use a new key`,
        );
      return { replayed: true, view: decisionView(retried) };
    }
    const step = before.steps.find((s) => s.key === request.stepKey && s.current);
    const options = step ? optionsOf(before, step) : null;
    if (!step || !options)
      throw new AppError(
        'STEP_NOT_REGISTERED',
        `task ${request.taskId} has no approval step ${request.stepKey}`,
      );
    const earlier = mine.find((d) => d.stepId === step.id);
    if (earlier) {
      if (earlier.decision !== request.decision)
        throw new AppError(
          'DECISION_CONFLICT',
          `you already decided ${earlier.decision} on step ${step.key} at ${earlier.decidedAt.toISOString()}`,
        );
      return { replayed: true, view: decisionView(earlier) };
    }
    const waiting = waitingApproval(step);
    if (waiting?.timeoutAt && new Date(waiting.timeoutAt) <= session.now)
      throw new AppError(
        'APPROVAL_TIMED_OUT',
        `the time to decide on step ${step.key} ran out at ${waiting.timeoutAt}`,
      );
    if (!waiting) {
      if ((step.stateData as { timedOut?: unknown } | null)?.timedOut === true)
        throw new AppError('APPROVAL_TIMED_OUT', `the time to decide on step ${step.key} ran out`);
      throw new AppError(
        'STEP_NOT_WAITING',
        isTerminal(before.execution.status)
          ? `the task has ended; step ${step.key} is ${step.status}`
          : `step ${step.key} is ${step.status}, not waiting for a decision`,
      );
    }
    const refused = mayDecide(options, before.task, decider);
    if (refused) throw new AppError(refused.code, refused.message);
    // The form is what an approval carries; a rejection may come without it.
    if (options.formSchema && (request.data !== undefined || request.decision === 'APPROVE')) {
      const errors = deps.schemas.validate(
        `approval:${before.execution.snapshot.definitionId}:${step.key}`,
        options.formSchema,
        request.data ?? {},
      );
      if (errors.length > 0)
        throw new AppError(
          'DECISION_DATA_INVALID',
          `data does not match the form schema of step ${step.key}`,
          errors,
        );
    }
    return {
      replayed: false,
      view: await record(deps, session, before, step, waiting, decider, request, requestHash),
    };
  });
}

async function record(
  deps: ApprovalDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  waiting: ApprovalWaiting,
  decider: Decider,
  request: DecisionRequest,
  requestHash: string,
): Promise<StepDecisionView> {
  const now = session.now;
  const entry: ApprovalDecision = {
    decidedBy: deciderKey(decider),
    decision: request.decision,
    decidedAt: now.toISOString(),
    ...(request.comment !== undefined ? { comment: request.comment } : {}),
    ...(request.data !== undefined ? { data: request.data } : {}),
    ...(decider.kind === 'operator' ? { reason: decider.reason } : {}),
  };
  const decisions = [...waiting.decisions, entry];
  const outcome = tally(waiting.required, decisions);
  const decided: StepRecord = {
    ...step,
    waitingFor: { ...waiting, decisions },
    version: step.version + 1n,
    updatedAt: now,
  };
  const steps = before.steps.map((s) => (s.id === step.id ? decided : s));
  const moved = taskAfterStepChange(before.task, before.execution, steps, undefined, now);
  const after: TaskState = { task: moved.task, execution: moved.execution, steps };
  const row: StepDecisionRecord = {
    id: deps.ids.newId(),
    taskId: before.task.id,
    stepId: step.id,
    stepKey: step.key,
    stepAttempt: step.attempt,
    decidedBy: entry.decidedBy,
    decision: request.decision,
    comment: request.comment ?? null,
    data: request.data ?? null,
    reason: decider.kind === 'operator' ? decider.reason : null,
    idempotencyKey: request.idempotencyKey,
    requestHash,
    outcome,
    taskVersion: after.task.version,
    decidedAt: now,
  };
  await session.commit(
    before,
    after,
    {
      id: row.id,
      type: 'APPROVAL_DECIDED',
      producer: decider.kind === 'operator' ? operatorProducer(decider.actor) : `user:${decider.userId}`,
      payload: {
        ...entry,
        outcome,
        ...(decider.kind === 'operator' ? { operator: operatorNamed(decider.actor) } : {}),
      },
      occurredAt: now,
      receivedAt: now,
      stepKey: step.key,
      stepAttempt: step.attempt,
      stepVersion: decided.version,
      operationCode: step.operationCode,
    },
    {
      write: {
        task: after.task,
        ...(after.execution !== before.execution ? { execution: after.execution } : {}),
        steps: [decided],
        stepDecisions: [row],
        timeline: [
          milestone(
            deps.ids,
            after,
            'APPROVAL_DECIDED',
            `${decider.kind === 'operator' ? `operator ${decider.actor.name}` : entry.decidedBy} decided ${request.decision} on step ${step.key}${decider.kind === 'operator' ? ` (reason: ${decider.reason})` : ''}`,
            { stepId: step.key, decidedBy: entry.decidedBy, decision: request.decision, outcome },
            now,
          ),
        ],
        ...(decider.kind === 'operator'
          ? {
              operatorAudit: [
                {
                  id: deps.ids.newId(),
                  action: operatorTaskActions.approval,
                  subjectId: before.task.id,
                  actor: decider.actor,
                  reason: decider.reason,
                  details: { stepKey: step.key, decision: request.decision, outcome },
                  tenantId: before.task.tenantId,
                  taskId: before.task.id,
                  before: { stepStatus: step.status },
                  after: { decision: request.decision, outcome },
                  createdAt: now,
                },
              ],
            }
          : {}),
      },
    },
  );
  if (outcome === 'APPROVED')
    await completePlatformStep(
      deps,
      session,
      after,
      decided,
      { decisions },
      {
        producer: `tdp:approval`,
        milestone: 'APPROVED',
        message: `step ${step.key} approved`,
      },
    );
  if (outcome === 'REJECTED')
    await failStepAttempt(
      deps,
      session,
      after,
      { ...decided, waitingFor: null, stateData: { decisions } },
      {
        producer: 'tdp:approval',
        error: {
          category: 'BUSINESS',
          code: 'APPROVAL_REJECTED',
          retryable: false,
          // The comment stays with the decision (the step's output), not in the failure's sentence.
          userMessage: `Step ${step.displayName ?? step.key} was rejected`,
        },
        infrastructure: false,
        workerId: null,
        milestone: 'REJECTED',
      },
    );
  return decisionView(row);
}

/** The approval's time ran out while it waited: `onTimeout` decides what the step becomes. */
export async function approvalTimedOut(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord | undefined,
): Promise<void> {
  const waiting = waitingApproval(step);
  if (!step || !waiting) return;
  const options = optionsOf(before, step);
  const decisions = waiting.decisions;
  const onTimeout = options?.onTimeout ?? 'REJECT';
  if (onTimeout === 'CONTINUE') {
    await completePlatformStep(
      deps,
      session,
      before,
      step,
      { decisions, timedOut: true },
      {
        producer: 'tdp:timer',
        milestone: 'APPROVAL_TIMED_OUT',
        message: `step ${step.key}: no decision in time; continuing`,
      },
    );
    return;
  }
  const code = onTimeout === 'FAIL' ? 'APPROVAL_TIMED_OUT' : 'APPROVAL_REJECTED';
  await failStepAttempt(
    deps,
    session,
    before,
    { ...step, waitingFor: null, stateData: { decisions, timedOut: true } },
    {
      producer: 'tdp:timer',
      error: {
        category: onTimeout === 'FAIL' ? 'TIMEOUT' : 'BUSINESS',
        code,
        retryable: false,
        userMessage: `Step ${step.displayName ?? step.key} was not approved in time`,
      },
      infrastructure: false,
      workerId: null,
      milestone: 'APPROVAL_TIMED_OUT',
    },
  );
}
