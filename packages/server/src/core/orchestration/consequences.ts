/**
 * The consequences: the one home of what a fact makes happen inside TDP. Every context that needs one of them
 * — the task's end after its last step, a forced cancel, a step attempt failed on the platform's own
 * account — calls it here, inside the fact session it already holds, so the consequence is written in
 * the same transaction as the fact that caused it. What follows a fact is decided by the pure modules
 * (`advance.ts` through `transitionRecords.ts`); this file only turns those decisions into facts. Its
 * family: placing a ready step on a worker is `placement.ts` (decided by the scheduler's selector), and
 * the map step's consequences are `kinds/map.ts`.
 */
import type { StructuredError } from '@tdp/protocol';
import type { StepRecord, TaskState, WorkerCommandRecord } from '../facts/records.ts';
import type { FactDeps, FactSession } from '../facts/session.ts';
import { endTask, isRefusal, stepIsFinished, taskAfterStepChange } from '../facts/stateMachine.ts';
import type { AttemptDeps } from '../workers/attempts.ts';
import type { MapItemLimits } from './kinds/mapItems.ts';
import { callbackFor, milestone, type Orchestrated, orchestrate, stepsToWrite } from './transitionRecords.ts';

/** What the consequences write with: ids, the credentials a placed attempt is issued with, the map limits. */
export type ConsequenceDeps = AttemptDeps & MapQuota;

/** The limits a map step's items must keep (kinds/map.ts), and who counts its refusals; absent: none. */
export interface MapQuota {
  mapItemLimits?: MapItemLimits;
  quotaRefused?: (code: 'MAP_ITEMS_LIMIT') => void;
}

/** A use case that opens fact transactions and asks for their consequences. */
export type FactConsequenceDeps = FactDeps & ConsequenceDeps;

/** The step as it is once cancelled: finished now (waiting for nothing), one version on. */
export function cancelledStep(step: StepRecord, now: Date): StepRecord {
  return {
    ...step,
    status: 'CANCELLED',
    finishedAt: now,
    waitingFor: null,
    version: step.version + 1n,
    updatedAt: now,
  };
}

/**
 * CANCEL_ATTEMPT to the workers of the items still running in these maps (they are ending: cancelled, or
 * failed under FAIL_ALL), but for the attempts in `settled` (ended in this transaction already).
 */
export async function stopRunningItems(
  deps: Pick<ConsequenceDeps, 'ids'>,
  session: FactSession,
  stepIds: string[],
  reason: string,
  settled: ReadonlySet<string> = new Set(),
): Promise<WorkerCommandRecord[]> {
  if (stepIds.length === 0) return [];
  const running = await session.tx.runningMapAttempts(stepIds);
  return running
    .filter(
      (r): r is { attemptId: string; workerId: string } => r.workerId !== null && !settled.has(r.attemptId),
    )
    .map((r) => ({
      id: deps.ids.newId(),
      workerId: r.workerId,
      type: 'CANCEL_ATTEMPT' as const,
      payload: { attemptId: r.attemptId, reason },
      createdAt: session.now,
    }));
}

const onWorker = (step: StepRecord) =>
  step.attemptId !== null && (step.status === 'QUEUED' || step.status === 'RUNNING');

/**
 * CANCEL_ATTEMPT to the workers still running these steps (as they were before they ended) and the items
 * of their maps: a cancelled or failed task stops its running steps, whose `ctx.signal` aborts.
 */
export async function stopOnWorkers(
  deps: Pick<ConsequenceDeps, 'ids'>,
  session: FactSession,
  steps: StepRecord[],
  reason: string,
): Promise<WorkerCommandRecord[]> {
  const commands: WorkerCommandRecord[] = [];
  for (const step of steps.filter(onWorker)) {
    const attempt = await session.tx.findAttempt(step.attemptId!);
    if (attempt?.workerId)
      commands.push({
        id: deps.ids.newId(),
        workerId: attempt.workerId,
        type: 'CANCEL_ATTEMPT',
        payload: { attemptId: step.attemptId, reason },
        createdAt: session.now,
      });
  }
  const maps = steps.filter((s) => s.waitingFor?.kind === 'map').map((s) => s.id);
  commands.push(...(await stopRunningItems(deps, session, maps, reason)));
  return commands;
}

/**
 * Ends a cancelling execution now: open steps are cancelled, their credentials revoked, workers freed.
 * (Cancelling a running platform task: CANCELLING → CANCEL_ATTEMPT to every open attempt → CANCELLED once
 * they have all stopped — their last facts arrive, `cancelIfStopped` — or when the grace period ends.)
 */
export async function forceCancel(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
): Promise<void> {
  const now = session.now;
  const ended = endTask(before.task, before.execution, 'CANCELLED', {}, now);
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
    'execution.cancelled',
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
      payload: { status: 'CANCELLED', previousStatus: before.execution.status },
      occurredAt: now,
      receivedAt: now,
    },
    {
      write: {
        task: after.task,
        execution: after.execution,
        steps: changed,
        revokeAttemptIds: revoke,
        closeSchedulingRequests: { stepIds: changed.map((s) => s.id), status: 'CANCELLED' },
        ...(maps.length > 0 ? { closeMapItems: { stepIds: maps, at: now } } : {}),
        callbacks: notified.callback ? [notified.callback] : [],
        timeline: [milestone(deps.ids, after, 'CANCELLED', 'execution cancelled', {}, now)],
      },
    },
  );
}

/** After a step of a cancelling execution stopped: cancel the execution once nothing is running. */
export async function cancelIfStopped(
  deps: ConsequenceDeps,
  session: FactSession,
  state: TaskState,
): Promise<void> {
  if (state.execution.status !== 'CANCELLING') return;
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
  deps: ConsequenceDeps,
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
        closeSchedulingRequests: { stepIds: [step.id], status: 'CANCELLED' },
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
  deps: ConsequenceDeps,
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
  // The steps cancelled with the failure stop on their workers as they would for a cancel.
  const stopCommands =
    end.outcome === 'FAILED' ? await stopOnWorkers(deps, session, end.cancelled, 'TASK_FAILED') : [];
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
        workerCommands: stopCommands,
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
