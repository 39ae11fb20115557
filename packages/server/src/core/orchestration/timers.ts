/**
 * Timers fire through the fact path, under the injected clock:
 * - RETRY_DUE: the step's new attempt becomes ready once its back-off has passed;
 * - SCHEDULE_TO_START: a step still waiting for a worker after its limit fails (retryable);
 * - START_TO_CLOSE: an attempt still open after its limit fails and its worker is told to stop;
 * - HEARTBEAT_TIMEOUT: an attempt whose last sign of life is older than its limit fails; otherwise the
 *   timer is set again for the next deadline;
 * - CANCEL_GRACE: a cancelling execution whose attempts have not stopped is cancelled anyway;
 * - STEP_BEGIN, SLEEP_DUE, SIGNAL_TIMEOUT, APPROVAL_TIMEOUT, MAP_ITEM_RETRY_DUE, MAP_ITEM_TIMEOUT: the
 *   steps the platform runs itself (kinds/);
 * - CHILD_FINISHED (on a parent task), CANCEL_CHILD (on a child task): parent and child tell each other
 *   of their ends (facts/taskFamily.ts, kinds/childTask.ts).
 * A timer whose step moved on (finished, superseded, retried) does nothing.
 */

import { isTerminal } from '../facts/execution.ts';
import type { StepRecord, TaskState, TimerRecord } from '../facts/records.ts';
import { type FactSession, inFactTransaction } from '../facts/session.ts';
import { type FactConsequenceDeps, failStepAttempt, forceCancel } from './consequences.ts';
import { approvalTimedOut } from './kinds/approval.ts';
import { beginStep, type KindDeps } from './kinds/begin.ts';
import { cancelChild, childFinished } from './kinds/childTask.ts';
import { mapItemRetryDue, mapItemTimedOut } from './kinds/mapTimers.ts';
import { signalTimedOut } from './kinds/signal.ts';
import { sleepDue } from './kinds/sleep.ts';
import { orchestrate } from './transitionRecords.ts';

export interface DueTimer {
  id: string;
  kind: TimerRecord['kind'];
  taskId: string;
  stepId: string | null;
  payload: Record<string, unknown>;
}

const open = (step: StepRecord | undefined, attemptId: unknown): step is StepRecord =>
  !!step?.current && step.attemptId === attemptId && (step.status === 'QUEUED' || step.status === 'RUNNING');

/** What firing a timer needs: the consequences, and what the kinds' begins need (`KindDeps`). */
export type TimerDeps = FactConsequenceDeps & KindDeps;

export async function fireTimer(deps: TimerDeps, timer: DueTimer): Promise<void> {
  // The tasks context cancels the child in a transaction of its own (it locks the child itself).
  if (timer.kind === 'CANCEL_CHILD') return cancelChild(deps, timer);
  await inFactTransaction(deps, async (session) => {
    const before = await session.lockTask(timer.taskId);
    if (!before || isTerminal(before.execution.status)) return;
    const step = before.steps.find((s) => s.id === timer.stepId);
    const limitMs = Number(timer.payload.limitMs ?? 0);
    switch (timer.kind) {
      case 'RETRY_DUE':
        if (step?.current && step.status === 'WAITING' && before.execution.status !== 'CANCELLING')
          await retryReady(deps, session, before, step);
        return;
      case 'SCHEDULE_TO_START':
        if (step?.current && (step.status === 'READY' || step.status === 'QUEUED')) {
          // The scheduler's last reason (e.g. "no worker offers image.watermrk@1") says what to fix.
          const reasons = step.status === 'READY' ? await session.tx.schedulingReasons(step.id) : [];
          const why = reasons.length > 0 ? `: ${reasons.join('; ')}` : '';
          await timedOut(
            deps,
            session,
            before,
            step,
            'SCHEDULE_TO_START_TIMEOUT',
            `no worker started it within ${limitMs} ms${why}`,
          );
        }
        return;
      case 'START_TO_CLOSE':
        if (open(step, timer.payload.attemptId)) {
          await timedOut(
            deps,
            session,
            before,
            step,
            'START_TO_CLOSE_TIMEOUT',
            `it did not finish within ${limitMs} ms`,
          );
        }
        return;
      case 'HEARTBEAT_TIMEOUT': {
        if (!open(step, timer.payload.attemptId)) return;
        const last = step.lastHeartbeatAt ?? step.startedAt ?? step.updatedAt;
        const deadline = last.getTime() + limitMs;
        if (deadline > session.now.getTime()) {
          await session.tx.write({
            events: [],
            outbox: [],
            realtime: [],
            timers: [
              {
                id: deps.ids.newId(),
                kind: 'HEARTBEAT_TIMEOUT',
                taskId: before.task.id,
                stepId: step.id,
                payload: timer.payload,
                availableAt: new Date(deadline),
                createdAt: session.now,
              },
            ],
          });
          return;
        }
        await timedOut(deps, session, before, step, 'HEARTBEAT_TIMEOUT', `no heartbeat for ${limitMs} ms`);
        return;
      }
      case 'CANCEL_GRACE':
        if (before.execution.status === 'CANCELLING') await forceCancel(deps, session, before);
        return;
      case 'STEP_BEGIN':
        if (before.execution.status !== 'CANCELLING') await beginStep(deps, session, before, step);
        return;
      case 'SLEEP_DUE':
        return sleepDue(deps, session, before, step);
      case 'SIGNAL_TIMEOUT':
        return signalTimedOut(deps, session, before, step);
      case 'APPROVAL_TIMEOUT':
        return approvalTimedOut(deps, session, before, step);
      case 'MAP_ITEM_RETRY_DUE':
        return mapItemRetryDue(deps, session, before, step, timer.payload);
      case 'MAP_ITEM_TIMEOUT':
        return mapItemTimedOut(deps, session, before, step, timer.payload);
      case 'CHILD_FINISHED':
        return childFinished(deps, session, before, step, timer.payload.childTaskId);
      case 'CANCEL_CHILD':
        return; // handled above, outside this transaction
      default: {
        // A new kind of timer fails the type check here until it is handled; a row of a kind this
        // version does not know (written by a newer replica) is left alone, as before.
        const unhandled: never = timer.kind;
        void unhandled;
        return;
      }
    }
  });
}

/** Fails the step's attempt as timed out; its worker (if one holds it) is told to cancel it. */
async function timedOut(
  deps: FactConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  code: string,
  detail: string,
) {
  const workerId = step.attemptId ? ((await session.findAttempt(step.attemptId))?.workerId ?? null) : null;
  return failStepAttempt(deps, session, before, step, {
    producer: 'tdp:timer',
    error: {
      category: 'TIMEOUT',
      code,
      retryable: true,
      userMessage: `Step ${step.key} timed out: ${detail}`,
    },
    infrastructure: false,
    workerId,
    milestone: 'TIMED_OUT',
  });
}

async function retryReady(
  deps: FactConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
) {
  const orchestrated = orchestrate(deps.ids, before, { kind: 'RETRY_DUE', stepKey: step.key }, session.now);
  const ready = orchestrated.changedSteps.find((s) => s.id === step.id);
  if (!ready) return;
  const after: TaskState = {
    ...orchestrated.state,
    task: { ...before.task, version: before.task.version + 1n, updatedAt: session.now },
  };
  await session.commit(
    before,
    after,
    {
      id: deps.ids.newId(),
      type: 'STEP_READY',
      producer: 'tdp:timer',
      payload: { reason: 'retry back-off elapsed', attempt: step.attempt },
      occurredAt: session.now,
      receivedAt: session.now,
      stepKey: step.key,
      stepAttempt: step.attempt,
      stepVersion: ready.version,
      operationCode: step.operationCode,
    },
    { write: { task: after.task, steps: orchestrated.changedSteps, ...orchestrated.write } },
  );
}
