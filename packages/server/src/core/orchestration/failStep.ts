/**
 * The platform failing a step attempt on its own account — a lost worker, an expired timeout, an input
 * that cannot be built — through the fact path, with the orchestration that follows (retry, skip, end).
 */
import type { StructuredError } from '@tdp/protocol';
import type { StepRecord, TaskState } from '../facts/records.ts';
import type { FactSession } from '../facts/session.ts';
import { taskAfterStepChange } from '../facts/stateMachine.ts';
import type { StatusDeps } from '../status/deps.ts';
import { finishPlatformTask } from '../status/events.ts';
import { milestone, orchestrate, stepsToWrite } from './platform.ts';

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
  deps: StatusDeps,
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
  if (orchestrated.end) await finishPlatformTask(deps, session, after, orchestrated.end);
  return after;
}
