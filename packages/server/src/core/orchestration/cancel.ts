/**
 * Cancelling a running platform task: CANCELING → CANCEL_ATTEMPT to every open attempt → CANCELED once
 * they have all stopped (their last facts arrive), or when the grace period ends, whichever is first.
 */

import type { StepRecord, TaskState } from '../facts/records.ts';
import type { FactSession } from '../facts/session.ts';
import { endTask, isRefusal, stepIsFinished } from '../facts/stateMachine.ts';
import type { StatusDeps } from '../status/deps.ts';
import { callbackFor, milestone } from './platform.ts';

/** The step as it is once cancelled: finished now, one version on. */
export function cancelledStep(step: StepRecord, now: Date): StepRecord {
  return { ...step, status: 'CANCELED', finishedAt: now, version: step.version + 1n, updatedAt: now };
}

/** Ends a cancelling execution now: open steps are cancelled, their credentials revoked, workers freed. */
export async function forceCancel(deps: StatusDeps, session: FactSession, before: TaskState): Promise<void> {
  const now = session.now;
  const ended = endTask(before.task, before.execution, 'CANCELED', {}, now);
  if (isRefusal(ended)) return;
  const revoke: string[] = [];
  const changed: StepRecord[] = [];
  // Revoking an attempt also frees its worker's slot (running attempts are the unrevoked ones).
  const steps = before.steps.map((step) => {
    if (!step.current || stepIsFinished(step.status)) return step;
    if (step.attemptId) revoke.push(step.attemptId);
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
        callbacks: notified.callback ? [notified.callback] : [],
        timeline: [milestone(deps.ids, after, 'CANCELED', 'execution cancelled', {}, now)],
      },
    },
  );
}

/** After a step of a cancelling execution stopped: cancel the execution once nothing is running. */
export async function cancelIfStopped(
  deps: StatusDeps,
  session: FactSession,
  state: TaskState,
): Promise<void> {
  if (state.execution.status !== 'CANCELING') return;
  const running = state.steps.some(
    (s) => s.current && s.attemptId && (s.status === 'QUEUED' || s.status === 'RUNNING'),
  );
  if (!running) await forceCancel(deps, session, state);
}
