/**
 * Timers fire through the fact path. RETRY_DUE: the step's new attempt becomes ready (with a scheduling
 * request) once its back-off has passed — unless the execution ended meanwhile.
 */
import type { StatusDeps } from '../status/deps.ts';
import { inFactTransaction } from '../status/facts.ts';
import { isTerminal } from '../tasks/execution.ts';
import type { TaskState } from '../tasks/model.ts';
import { orchestrate } from './platform.ts';

export interface DueTimer {
  id: string;
  kind: string;
  taskId: string;
  stepId: string | null;
}

export async function fireTimer(deps: StatusDeps, timer: DueTimer): Promise<void> {
  if (timer.kind !== 'RETRY_DUE') return;
  await inFactTransaction(deps, async (session) => {
    const before = await session.tx.lockTask(timer.taskId);
    const step = before?.steps.find((s) => s.id === timer.stepId);
    if (!before || !step?.current || step.status !== 'WAITING' || isTerminal(before.execution.status)) return;
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
  });
}
