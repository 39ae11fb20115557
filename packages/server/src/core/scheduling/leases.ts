/**
 * Lost workers: a session whose heartbeats stopped past its TTL loses its leases. Each open attempt it
 * held fails as WORKER_LOST (an infrastructure failure: retried under every failure policy while
 * attempts remain) through the fact path, so the step runs again elsewhere; the lost worker's late
 * events then find a superseded attempt and are answered STALE_EXECUTION.
 */
import { milestone, orchestrate, stepsToWrite } from '../orchestration/platform.ts';
import { finishPlatformTask } from '../status/events.ts';
import { inFactTransaction } from '../status/facts.ts';
import { taskAfterStepChange } from '../status/stateMachine.ts';
import type { StepRecord, TaskState } from '../tasks/model.ts';
import type { DispatchDeps } from './dispatch.ts';

export async function reapLostWorkers(deps: DispatchDeps): Promise<number> {
  const now = deps.status.clock.now();
  const lost = await deps.workers.silentWorkers(new Date(now.getTime() - deps.heartbeatTtlMs));
  let reaped = 0;
  for (const workerId of lost) {
    await deps.workers.endWorker(workerId, now);
    for (const { attemptId, taskId } of await deps.workers.openAttempts(workerId)) {
      await inFactTransaction(deps.status, async (session) => {
        const before = await session.tx.lockTask(taskId);
        const step = before?.steps.find((s) => s.attemptId === attemptId);
        if (!before || !step?.current || (step.status !== 'QUEUED' && step.status !== 'RUNNING')) return;
        const at = session.now;
        const error = {
          category: 'WORKER',
          code: 'WORKER_LOST',
          retryable: true,
          userMessage: 'The worker running this step stopped responding; retrying',
        };
        const failed: StepRecord = {
          ...step,
          status: 'FAILED',
          finishedAt: at,
          error,
          version: step.version + 1n,
          updatedAt: at,
        };
        const orchestrated = orchestrate(
          deps.status.ids,
          { ...before, steps: before.steps.map((s) => (s.id === step.id ? failed : s)) },
          {
            kind: 'STEP_FAILED',
            stepKey: step.key,
            errorCode: 'WORKER_LOST',
            retryable: true,
            infrastructure: true,
          },
          at,
        );
        const moved = taskAfterStepChange(
          before.task,
          before.execution,
          orchestrated.state.steps,
          undefined,
          at,
        );
        const after: TaskState = {
          task: moved.task,
          execution: moved.execution,
          steps: orchestrated.state.steps,
        };
        await session.commit(
          before,
          after,
          {
            id: deps.status.ids.newId(),
            type: 'STEP_FAILED',
            producer: 'tdp:lease-reaper',
            payload: { error, workerId },
            occurredAt: at,
            receivedAt: at,
            stepKey: step.key,
            stepAttempt: step.attempt,
            attemptId,
            stepVersion: failed.version,
            operationCode: step.operationCode,
            errorCode: 'WORKER_LOST',
          },
          {
            write: {
              task: after.task,
              ...(after.execution !== before.execution ? { execution: after.execution } : {}),
              steps: stepsToWrite(failed, orchestrated),
              ...orchestrated.write,
              revokeAttemptIds: [attemptId, ...(orchestrated.write.revokeAttemptIds ?? [])],
              workerLoad: [{ workerId, delta: -1 }],
              timeline: [
                milestone(
                  deps.status.ids,
                  after,
                  'WORKER_LOST',
                  `worker ${workerId} stopped heartbeating; step ${step.key} attempt ${step.attempt} lost`,
                  { workerId, stepId: step.key },
                  at,
                ),
                ...(orchestrated.write.timeline ?? []),
              ],
            },
          },
        );
        if (orchestrated.end) await finishPlatformTask(deps.status, session, after, orchestrated.end);
        reaped += 1;
      });
    }
  }
  return reaped;
}
