import type { TaskWithExecution } from '@tdp/protocol';
import { isTerminal, lifecycleOf, planCancel, transitionExecution } from '../facts/execution.ts';
import type { StepRecord, TaskState, TimerRecord } from '../facts/records.ts';
import { type FactDeps, type FactSession, inFactTransaction } from '../facts/session.ts';
import { endTask, isRefusal } from '../facts/stateMachine.ts';
import { toTaskView } from '../facts/views.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { cancelledStep, stopOnWorkers } from '../orchestration/consequences.ts';
import { callbackFor, isPlatformTask, milestone } from '../orchestration/transitionRecords.ts';
import { AppError } from '../shared/errors.ts';

const finishedSteps = new Set<StepRecord['status']>(['SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED']);

export interface CancelDeps extends FactDeps {
  /** How long running attempts get to stop after a cancel before the execution is cancelled anyway. */
  cancelGraceMs: number;
}

/**
 * Cancels the task's current execution, as its coordinator. Idempotent: cancelling a cancelled (or
 * cancelling) task answers with its state and records nothing new; a finished task cannot be cancelled.
 * The fact goes through the status service's single path (TASK_CANCELLED / TASK_CANCEL_REQUESTED).
 */
export async function cancelTask(
  deps: CancelDeps,
  principal: ApplicationPrincipal,
  taskId: string,
  reason: string | null,
): Promise<TaskWithExecution> {
  return (await cancelTaskChanged(deps, principal, taskId, reason)).task;
}

/**
 * `cancelTask`, saying whether it changed the task (false: it was cancelled or cancelling already);
 * `producer` names who asked, in the event (the application by default; an operator's bulk cancel).
 */
export async function cancelTaskChanged(
  deps: CancelDeps,
  principal: ApplicationPrincipal,
  taskId: string,
  reason: string | null,
  producer = `application:${principal.applicationId}`,
): Promise<{ task: TaskWithExecution; changed: boolean }> {
  return inFactTransaction(deps, (session) =>
    cancelInSession(deps, session, principal, taskId, reason, producer),
  );
}

/** `cancelTaskChanged` inside a transaction the caller holds (a debounce cancels the task it replaces). */
export async function cancelInSession(
  deps: CancelDeps,
  session: FactSession,
  principal: ApplicationPrincipal,
  taskId: string,
  reason: string | null,
  producer = `application:${principal.applicationId}`,
): Promise<{ task: TaskWithExecution; changed: boolean }> {
  const before = await session.lockTask(taskId);
  if (!before || before.task.applicationId !== principal.applicationId) {
    throw new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);
  }
  // A platform task with nothing on a worker (every open step waits on the platform: a sleep, a
  // signal, …) has nothing to wait for: the cancel ends the execution at once.
  const onWorkers =
    !isPlatformTask(before) ||
    before.steps.some((s) => s.current && s.attemptId && (s.status === 'QUEUED' || s.status === 'RUNNING'));
  const planned = planCancel(before.execution.status);
  const plan =
    planned.kind === 'transition' && planned.to === 'CANCELLING' && !onWorkers
      ? { ...planned, to: 'CANCELLED' as const }
      : planned;
  if (plan.kind === 'already') return { task: toTaskView(before), changed: false };
  if (plan.kind === 'refused') {
    throw new AppError(
      'INVALID_TRANSITION',
      `task ${taskId} already ended with ${plan.status}; it cannot be cancelled`,
    );
  }
  const now = session.now;
  let after: TaskState;
  const revokeAttemptIds: string[] = [];
  /** Attempts on workers, asked to stop (CANCELLING): the execution ends once they did, or after the grace. */
  const stillRunning: StepRecord[] = [];
  const graceTimers: TimerRecord[] = [];
  if (plan.to === 'CANCELLED') {
    const ended = endTask(before.task, before.execution, 'CANCELLED', {}, now);
    if (isRefusal(ended)) throw new AppError(ended.code, ended.message);
    const steps = before.steps.map((step) => {
      if (!step.current || finishedSteps.has(step.status)) return step;
      if (step.attemptId) revokeAttemptIds.push(step.attemptId);
      return cancelledStep(step, now);
    });
    after = { task: ended.task, execution: ended.execution, steps };
  } else {
    // Running: stop what has not started, ask workers to stop what has, and wait (within a grace period).
    const execution = transitionExecution(before.execution, plan.to, now);
    const steps = before.steps.map((step) => {
      if (!step.current || finishedSteps.has(step.status)) return step;
      if (step.attemptId && (step.status === 'QUEUED' || step.status === 'RUNNING')) {
        stillRunning.push(step);
        return step;
      }
      return cancelledStep(step, now);
    });
    after = {
      task: {
        ...before.task,
        lifecycleStatus: lifecycleOf(execution.status),
        version: before.task.version + 1n,
        updatedAt: now,
      },
      execution,
      steps,
    };
    graceTimers.push({
      id: deps.ids.newId(),
      kind: 'CANCEL_GRACE',
      taskId: before.task.id,
      stepId: null,
      payload: {},
      availableAt: new Date(now.getTime() + deps.cancelGraceMs),
      createdAt: now,
    });
  }
  const eventId = deps.ids.newId();
  const cancelledStepIds = after.steps
    .filter((s, i) => s !== before.steps[i] && s.status === 'CANCELLED')
    .map((s) => s.id);
  // A running map's items are cancelled with it, and the attempts of the running ones revoked.
  const cancelledMaps = before.steps
    .filter((s) => cancelledStepIds.includes(s.id) && s.waitingFor?.kind === 'map')
    .map((s) => s.id);
  const stopCommands = await stopOnWorkers(
    deps,
    session,
    [...stillRunning, ...before.steps.filter((s) => cancelledMaps.includes(s.id))],
    'TASK_CANCELLED',
  );
  const notified = callbackFor(
    deps.ids,
    after,
    eventId,
    isTerminal(after.execution.status) ? 'execution.cancelled' : 'execution.cancelling',
    now,
  );
  after = notified.state;
  await session.commit(
    before,
    after,
    {
      id: eventId,
      type: isTerminal(after.execution.status) ? 'TASK_CANCELLED' : 'TASK_CANCEL_REQUESTED',
      producer,
      payload: { status: after.execution.status, previousStatus: before.execution.status, reason },
      occurredAt: now,
      receivedAt: now,
    },
    {
      write: {
        task: after.task,
        execution: after.execution,
        steps: after.steps.filter((s, i) => s !== before.steps[i]),
        revokeAttemptIds,
        closeSchedulingRequests: { stepIds: cancelledStepIds, status: 'CANCELLED' },
        ...(cancelledMaps.length > 0 ? { closeMapItems: { stepIds: cancelledMaps, at: now } } : {}),
        callbacks: notified.callback ? [notified.callback] : [],
        workerCommands: stopCommands,
        timers: graceTimers,
        timeline: [
          milestone(deps.ids, after, 'CANCELLED', reason ? `cancelled: ${reason}` : 'cancelled', {}, now),
        ],
      },
    },
  );
  return { task: toTaskView(after), changed: true };
}
