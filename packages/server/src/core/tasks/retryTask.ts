import type { TaskWithExecution } from '@tdp/protocol';
import { isTerminal, lifecycleOf } from '../facts/execution.ts';
import { newStepRecord } from '../facts/newRecords.ts';
import type { ExecutionRecord, TaskState } from '../facts/records.ts';
import { type FactDeps, inFactTransaction } from '../facts/session.ts';
import { toTaskView } from '../facts/views.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { callbackFor, milestone, orchestrate, platformWorkerProducer } from '../orchestration/platform.ts';
import { AppError } from '../shared/errors.ts';

/**
 * Runs a finished task again: execution #n+1 with the same frozen snapshot and fresh steps, its roots
 * ready at once. Facts that still arrive for the earlier execution are answered STALE_EXECUTION.
 */
export async function retryTask(
  deps: FactDeps,
  principal: ApplicationPrincipal,
  taskId: string,
): Promise<TaskWithExecution> {
  return inFactTransaction(deps, async (session) => {
    const before = await session.lockTask(taskId);
    if (!before || before.task.applicationId !== principal.applicationId)
      throw new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);
    if (before.task.workflowDefinitionId === null) {
      throw new AppError(
        'INVALID_TRANSITION',
        `task ${taskId} is coordinated by its application; start a new attempt of its steps instead`,
      );
    }
    if (!isTerminal(before.execution.status)) {
      throw new AppError(
        'INVALID_TRANSITION',
        `execution #${before.execution.number} is still ${before.execution.status}; cancel it first or wait for it to end`,
      );
    }
    const now = session.now;
    const execution: ExecutionRecord = {
      id: deps.ids.newId(),
      taskId,
      number: before.execution.number + 1,
      status: 'CREATED',
      progress: 0,
      snapshot: before.execution.snapshot,
      version: 1n,
      callbackSequence: 0,
      createdAt: now,
      startedAt: null,
      completedAt: null,
      updatedAt: now,
    };
    const steps = execution.snapshot.steps.map((d) =>
      newStepRecord(
        deps.ids,
        taskId,
        execution.id,
        {
          key: d.key,
          operationCode: d.capability,
          capability: d.capability,
          capabilityVersion: d.capabilityVersion,
          expectedProducer: platformWorkerProducer,
          dependsOn: d.dependsOn,
          failurePolicy: d.failurePolicy,
        },
        now,
      ),
    );
    const fresh: TaskState = {
      task: {
        ...before.task,
        currentExecutionId: execution.id,
        lifecycleStatus: lifecycleOf('CREATED'),
        businessStatus: before.task.statusDefinitionVersion === null ? 'PENDING' : before.task.businessStatus,
        health: 'HEALTHY',
        failure: null,
        startedAt: null,
        finishedAt: null,
        durationMs: null,
        version: before.task.version + 1n,
        updatedAt: now,
      },
      execution,
      steps,
    };
    const started = orchestrate(deps.ids, fresh, { kind: 'EXECUTION_STARTED' }, now);
    const eventId = deps.ids.newId();
    const { state: after, callback } = callbackFor(
      deps.ids,
      started.state,
      eventId,
      'execution.created',
      now,
    );
    await session.commit(
      before,
      after,
      {
        id: eventId,
        type: 'TASK_RETRIED',
        producer: `application:${principal.applicationId}`,
        payload: {
          previousExecutionId: before.execution.id,
          previousStatus: before.execution.status,
          executionNumber: execution.number,
        },
        occurredAt: now,
        receivedAt: now,
      },
      {
        write: {
          task: after.task,
          newExecution: after.execution,
          newSteps: after.steps,
          schedulingRequests: started.write.schedulingRequests ?? [],
          timers: started.write.timers ?? [],
          callbacks: callback ? [callback] : [],
          timeline: [
            milestone(
              deps.ids,
              after,
              'CREATED',
              `execution #${execution.number} created (retry of #${before.execution.number})`,
              {},
              now,
            ),
            ...(started.write.timeline ?? []),
          ],
        },
      },
    );
    return toTaskView(after);
  });
}
