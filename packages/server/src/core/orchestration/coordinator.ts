/**
 * The coordinator: the one home of a fact's consequences inside TDP. Every context that needs one of them
 * — the task's end after its last step, a forced cancel, a step attempt failed on the platform's own
 * account, a ready step placed on a worker — calls it here, inside the fact session it already holds, so
 * the consequence is written in the same transaction as the fact that caused it. What follows a fact is
 * decided by the pure modules (`advance.ts` through `platform.ts`, the scheduler's selector); this file
 * only turns those decisions into facts.
 */
import type { StructuredError } from '@tdp/protocol';
import { isTerminal } from '../facts/execution.ts';
import type { StepRecord, TaskState, WorkerCommandRecord } from '../facts/records.ts';
import type { FactDeps, FactSession } from '../facts/session.ts';
import { endTask, isRefusal, stepIsFinished, taskAfterStepChange } from '../facts/stateMachine.ts';
import { type AttemptDeps, issueContext, newAttempt } from '../scheduling/attempts.ts';
import { selectWorker, type WorkerCandidate } from '../scheduling/selector.ts';
import { noTracing, type Tracing } from '../shared/ports.ts';
import {
  callbackFor,
  milestone,
  type Orchestrated,
  orchestrate,
  platformWorkerProducer,
  resolvePlatformInput,
  stepsToWrite,
} from './platform.ts';

/** The active span's `traceparent` as a command payload field (none with tracing off). */
export function traceContext(tracing: Tracing | undefined): { traceparent?: string } {
  const traceparent = tracing?.traceparent();
  return traceparent ? { traceparent } : {};
}

/** What the coordinator writes with: ids, and the credentials a placed attempt is issued with. */
export type CoordinatorDeps = AttemptDeps;

/** A use case that opens fact transactions and asks the coordinator for their consequences. */
export type CoordinatedDeps = FactDeps & CoordinatorDeps;

/** Placing a step also needs to know which workers still count as alive. */
export interface PlacementDeps {
  status: CoordinatorDeps & { tracing?: Tracing };
  heartbeatTtlMs: number;
}

/** The step as it is once cancelled: finished now (waiting for nothing), one version on. */
export function cancelledStep(step: StepRecord, now: Date): StepRecord {
  return {
    ...step,
    status: 'CANCELED',
    finishedAt: now,
    waitingFor: null,
    version: step.version + 1n,
    updatedAt: now,
  };
}

/**
 * Ends a cancelling execution now: open steps are cancelled, their credentials revoked, workers freed.
 * (Cancelling a running platform task: CANCELING → CANCEL_ATTEMPT to every open attempt → CANCELED once
 * they have all stopped — their last facts arrive, `cancelIfStopped` — or when the grace period ends.)
 */
export async function forceCancel(
  deps: CoordinatorDeps,
  session: FactSession,
  before: TaskState,
): Promise<void> {
  const now = session.now;
  const ended = endTask(before.task, before.execution, 'CANCELED', {}, now);
  if (isRefusal(ended)) return;
  const revoke: string[] = [];
  const changed: StepRecord[] = [];
  /** Running maps: their items are cancelled and the attempts of the running ones revoked. */
  const maps: string[] = [];
  // Revoking an attempt also frees its worker's slot (running attempts are the unrevoked ones).
  const steps = before.steps.map((step) => {
    if (!step.current || stepIsFinished(step.status)) return step;
    if (step.attemptId) revoke.push(step.attemptId);
    if (step.waitingFor?.kind === 'map') maps.push(step.id);
    const cancelled = cancelledStep(step, now);
    changed.push(cancelled);
    return cancelled;
  });
  const eventId = deps.ids.newId();
  const notified = callbackFor(
    deps.ids,
    { task: ended.task, execution: ended.execution, steps },
    eventId,
    'execution.canceled',
    now,
  );
  const after = notified.state;
  await session.commit(
    before,
    after,
    {
      id: eventId,
      type: 'TASK_CANCELLED',
      producer: 'tdp:orchestrator',
      payload: { status: 'CANCELED', previousStatus: before.execution.status },
      occurredAt: now,
      receivedAt: now,
    },
    {
      write: {
        task: after.task,
        execution: after.execution,
        steps: changed,
        revokeAttemptIds: revoke,
        closeSchedulingRequests: { stepIds: changed.map((s) => s.id), status: 'CANCELED' },
        ...(maps.length > 0 ? { closeMapItems: { stepIds: maps, at: now } } : {}),
        callbacks: notified.callback ? [notified.callback] : [],
        timeline: [milestone(deps.ids, after, 'CANCELED', 'execution cancelled', {}, now)],
      },
    },
  );
}

/** After a step of a cancelling execution stopped: cancel the execution once nothing is running. */
export async function cancelIfStopped(
  deps: CoordinatorDeps,
  session: FactSession,
  state: TaskState,
): Promise<void> {
  if (state.execution.status !== 'CANCELING') return;
  const running = state.steps.some(
    (s) => s.current && s.attemptId && (s.status === 'QUEUED' || s.status === 'RUNNING'),
  );
  if (!running) await forceCancel(deps, session, state);
}

/**
 * The platform failing a step attempt on its own account — a lost worker, an expired timeout, an input
 * that cannot be built — through the fact path, with the orchestration that follows (retry, skip, end).
 */
export interface PlatformFailure {
  producer: string;
  error: StructuredError;
  /** Lost rather than failed: retried under every failure policy while attempts remain. */
  infrastructure: boolean;
  /** The worker holding the attempt: its capacity is freed and it is told to stop. */
  workerId: string | null;
  milestone: string;
}

export async function failStepAttempt(
  deps: CoordinatorDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  failure: PlatformFailure,
): Promise<TaskState> {
  const at = session.now;
  const failed: StepRecord = {
    ...step,
    status: 'FAILED',
    finishedAt: at,
    error: failure.error,
    // A platform step's wait is over, as when it succeeds.
    waitingFor: null,
    version: step.version + 1n,
    updatedAt: at,
  };
  const orchestrated = orchestrate(
    deps.ids,
    { ...before, steps: before.steps.map((s) => (s.id === step.id ? failed : s)) },
    {
      kind: 'STEP_FAILED',
      stepKey: step.key,
      errorCode: failure.error.code,
      retryable: failure.error.retryable,
      infrastructure: failure.infrastructure,
    },
    at,
  );
  const moved = taskAfterStepChange(before.task, before.execution, orchestrated.state.steps, undefined, at);
  const after: TaskState = { task: moved.task, execution: moved.execution, steps: orchestrated.state.steps };
  await session.commit(
    before,
    after,
    {
      id: deps.ids.newId(),
      type: 'STEP_FAILED',
      producer: failure.producer,
      payload: { error: failure.error, ...(failure.workerId ? { workerId: failure.workerId } : {}) },
      occurredAt: at,
      receivedAt: at,
      stepKey: step.key,
      stepAttempt: step.attempt,
      attemptId: step.attemptId,
      stepVersion: failed.version,
      operationCode: step.operationCode,
      errorCode: failure.error.code,
    },
    {
      write: {
        task: after.task,
        ...(after.execution !== before.execution ? { execution: after.execution } : {}),
        steps: stepsToWrite(failed, orchestrated),
        ...orchestrated.write,
        revokeAttemptIds: [
          ...(step.attemptId ? [step.attemptId] : []),
          ...(orchestrated.write.revokeAttemptIds ?? []),
        ],
        closeSchedulingRequests: { stepIds: [step.id], status: 'CANCELED' },
        ...(failure.workerId
          ? {
              workerCommands: [
                {
                  id: deps.ids.newId(),
                  workerId: failure.workerId,
                  type: 'CANCEL_ATTEMPT',
                  payload: { attemptId: step.attemptId, reason: failure.error.code },
                  createdAt: at,
                },
              ],
            }
          : {}),
        timeline: [
          milestone(
            deps.ids,
            after,
            failure.milestone,
            `step ${step.key} attempt ${step.attempt}: ${failure.error.code}`,
            { stepId: step.key, attempt: step.attempt, code: failure.error.code },
            at,
          ),
          ...(orchestrated.write.timeline ?? []),
        ],
      },
    },
  );
  if (orchestrated.end) await finishTask(deps, session, after, orchestrated.end);
  return after;
}

/** The orchestrator, as the platform tasks' coordinator, ends the task: its own fact after the step's. */
export async function finishTask(
  deps: CoordinatorDeps,
  session: FactSession,
  current: TaskState,
  end: NonNullable<Orchestrated['end']>,
) {
  const now = session.now;
  const before = current;
  // The task fails with its step's code and the step's words for people ("the ZIP is damaged: …").
  const failedStep =
    end.outcome === 'FAILED' ? current.steps.find((s) => s.key === end.stepKey && s.current) : undefined;
  const failure =
    end.outcome === 'FAILED'
      ? {
          category: 'STEP',
          code: end.errorCode,
          retryable: false,
          ...(failedStep?.error?.userMessage ? { userMessage: failedStep.error.userMessage } : {}),
          ...(failedStep?.error?.detail ? { detail: failedStep.error.detail } : {}),
          failedStepId: end.stepKey,
        }
      : null;
  const ended = endTask(before.task, before.execution, end.outcome, { failure }, now);
  if (isRefusal(ended)) return;
  const degraded = end.outcome === 'SUCCEEDED' && end.degraded;
  let after: TaskState = {
    task: { ...ended.task, ...(degraded ? { health: 'DEGRADED' as const } : {}) },
    execution: ended.execution,
    steps: before.steps,
  };
  const eventId = deps.ids.newId();
  const notified = callbackFor(
    deps.ids,
    after,
    eventId,
    `execution.${after.execution.status.toLowerCase()}`,
    now,
  );
  after = notified.state;
  await session.commit(
    before,
    after,
    {
      id: eventId,
      type: end.outcome === 'SUCCEEDED' ? 'TASK_COMPLETED' : 'TASK_FAILED',
      producer: 'tdp:orchestrator',
      payload:
        end.outcome === 'FAILED' ? { failedStepId: end.stepKey, errorCode: end.errorCode } : { degraded },
      occurredAt: now,
      receivedAt: now,
      errorCode: failure?.code ?? null,
    },
    {
      write: {
        task: after.task,
        execution: after.execution,
        callbacks: notified.callback ? [notified.callback] : [],
        timeline: [
          milestone(
            deps.ids,
            after,
            'FINISHED',
            `execution #${after.execution.number} ${after.execution.status.toLowerCase()}`,
            { status: after.execution.status },
            now,
          ),
        ],
      },
    },
  );
}

export type Placement =
  | { kind: 'placed'; command: WorkerCommandRecord }
  /** The step no longer waits for a worker (it moved on, or its execution ended). */
  | { kind: 'stale' }
  | { kind: 'unplaceable'; reasons: string[] }
  /** Its input could not be resolved (the step was failed, if asked to). */
  | { kind: 'invalid' };

/**
 * Places one READY step inside the session: chooses a worker among `candidates` (whose running counts it
 * raises), then commits the attempt, the START_ATTEMPT command, the timeout timers, the milestone and the
 * STEP_DISPATCHED fact. The caller locked the task (`before`) and sends the command after the commit.
 */
export function placeStep(
  deps: PlacementDeps,
  session: FactSession,
  before: TaskState | null,
  stepId: string,
  candidates: WorkerCandidate[],
  failInvalidInput: boolean,
): Promise<Placement> {
  // The span continues the create's trace (kept in the snapshot), on whichever replica places the step.
  const attributes = { taskId: before?.task.id, executionId: before?.execution.id, stepId };
  return (deps.status.tracing ?? noTracing).inSpan(
    'tdp.schedule.place',
    { parent: before?.execution.snapshot.traceparent, attributes },
    () => placeInSpan(deps, session, before, stepId, candidates, failInvalidInput),
  );
}

async function placeInSpan(
  deps: PlacementDeps,
  session: FactSession,
  before: TaskState | null,
  stepId: string,
  candidates: WorkerCandidate[],
  failInvalidInput: boolean,
): Promise<Placement> {
  const now = session.now;
  const step = before?.steps.find((s) => s.id === stepId);
  if (
    !before ||
    !step?.current ||
    step.status !== 'READY' ||
    step.attemptId ||
    isTerminal(before.execution.status)
  ) {
    return { kind: 'stale' };
  }
  const definition = before.execution.snapshot.steps.find((d) => d.key === step.key)!;
  const selection = selectWorker(
    candidates,
    {
      capability: step.capability,
      capabilityVersion: step.capabilityVersion,
      affinity: definition.affinity,
    },
    now,
    deps.heartbeatTtlMs,
  );
  if (!selection.ok) return { kind: 'unplaceable', reasons: selection.reasons };
  const input = resolvePlatformInput(before, step);
  if (!input.ok) {
    if (!failInvalidInput) return { kind: 'invalid' };
    await failStepAttempt(deps.status, session, before, step, {
      producer: 'tdp:scheduler',
      error: { category: 'INPUT', code: input.code, retryable: false, userMessage: input.message },
      infrastructure: false,
      workerId: null,
      milestone: 'INPUT_INVALID',
    });
    return { kind: 'invalid' };
  }
  const attempt = newAttempt(
    deps.status,
    before,
    step,
    platformWorkerProducer,
    null,
    now,
    selection.workerId,
  );
  const queued: StepRecord = {
    ...step,
    status: 'QUEUED',
    attemptId: attempt.id,
    version: step.version + 1n,
    updatedAt: now,
  };
  const steps = before.steps.map((s) => (s.id === step.id ? queued : s));
  const moved = taskAfterStepChange(before.task, before.execution, steps, undefined, now);
  const after: TaskState = { task: moved.task, execution: moved.execution, steps };
  const context = await issueContext(deps.status, after, queued, attempt, true);
  const command: WorkerCommandRecord = {
    id: deps.status.ids.newId(),
    workerId: selection.workerId,
    type: 'START_ATTEMPT',
    payload: {
      attemptId: attempt.id,
      leaseVersion: attempt.leaseVersion,
      taskId: before.task.id,
      executionId: before.execution.id,
      stepId: step.key,
      attempt: step.attempt,
      capability: step.capability,
      capabilityVersion: step.capabilityVersion,
      input: input.value,
      executionToken: context.executionToken,
      heartbeatIntervalSeconds: context.heartbeatIntervalSeconds,
      timeouts: definition.timeouts,
      ...traceContext(deps.status.tracing),
    },
    createdAt: now,
  };
  const chosen = candidates.find((c) => c.workerId === selection.workerId)!;
  chosen.runningAttempts += 1;
  chosen.runningByCapability[step.capability] = (chosen.runningByCapability[step.capability] ?? 0) + 1;
  await session.commit(
    before,
    after,
    {
      id: deps.status.ids.newId(),
      type: 'STEP_DISPATCHED',
      producer: 'tdp:scheduler',
      payload: { workerId: selection.workerId, nodeId: selection.nodeId, score: selection.score },
      occurredAt: now,
      receivedAt: now,
      stepKey: step.key,
      stepAttempt: step.attempt,
      attemptId: attempt.id,
      stepVersion: queued.version,
      operationCode: step.operationCode,
    },
    {
      write: {
        task: after.task,
        ...(after.execution !== before.execution ? { execution: after.execution } : {}),
        steps: [queued],
        attempts: [attempt],
        closeSchedulingRequests: { stepIds: [step.id], status: 'DISPATCHED' },
        workerCommands: [command],
        // Both limits run from the placement; the heartbeat timer re-arms itself while beats arrive.
        timers: (
          [
            ['START_TO_CLOSE', definition.timeouts.startToCloseMs],
            ['HEARTBEAT_TIMEOUT', definition.timeouts.heartbeatMs],
          ] as const
        )
          .filter(([, limitMs]) => limitMs !== undefined)
          .map(([kind, limitMs]) => ({
            id: deps.status.ids.newId(),
            kind,
            taskId: before.task.id,
            stepId: step.id,
            payload: { attemptId: attempt.id, limitMs },
            availableAt: new Date(now.getTime() + limitMs!),
            createdAt: now,
          })),
        timeline: [
          milestone(
            deps.status.ids,
            after,
            'WORKER_SELECTED',
            `step ${step.key} attempt ${step.attempt} → worker ${selection.workerId} on ${selection.nodeId} (score ${selection.score})`,
            {
              stepId: step.key,
              workerId: selection.workerId,
              nodeId: selection.nodeId,
              score: selection.score,
            },
            now,
          ),
        ],
      },
    },
  );
  return { kind: 'placed', command };
}
