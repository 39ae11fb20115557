import type { TaskWithExecution } from '@tdp/protocol';
import { isTerminal, lifecycleOf } from '../facts/execution.ts';
import { newStepRecord } from '../facts/newRecords.ts';
import type { ExecutionRecord, TaskState } from '../facts/records.ts';
import { type FactDeps, inFactTransaction } from '../facts/session.ts';
import { isRefusal } from '../facts/stateMachine.ts';
import { toTaskView } from '../facts/views.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { earlierSteps, planRerun, type RerunPlan, reusedStep } from '../orchestration/rerun.ts';
import {
  callbackFor,
  milestone,
  orchestrate,
  platformWorkerProducer,
} from '../orchestration/transitionRecords.ts';
import { AppError } from '../shared/errors.ts';

export interface RetryRequest {
  /** Rerun from this step: the steps outside it and its downstream keep their earlier outputs. */
  fromStep?: string | undefined;
  /** Why (kept in the event and the timeline), and who asked when not the application (an operator). */
  reason?: string | undefined;
  producer?: string | undefined;
}

/**
 * Runs a finished task again: execution #n+1 with the same frozen snapshot and fresh steps, its roots
 * ready at once. Facts that still arrive for the earlier execution are answered STALE_EXECUTION.
 * With `fromStep`, the steps that are neither it nor downstream of it start SUCCEEDED with the output
 * they had (marked reused), so only `fromStep` and what follows runs again.
 */
export async function retryTask(
  deps: FactDeps,
  principal: ApplicationPrincipal,
  taskId: string,
  request: RetryRequest = {},
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
    let plan: RerunPlan | null = null;
    if (request.fromStep !== undefined) {
      const earlier = earlierSteps(before.steps, before.execution.id);
      const planned = planRerun(before.execution.snapshot.steps, earlier, request.fromStep);
      if (isRefusal(planned)) throw new AppError(planned.code, planned.message);
      plan = planned;
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
    const steps = execution.snapshot.steps.map((d) => {
      const step = newStepRecord(
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
      );
      const reused = plan?.reused.get(d.key);
      return reused ? reusedStep(step, reused, now) : step;
    });
    const reusedKeys = [...(plan?.reused.keys() ?? [])];
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
        producer: request.producer ?? `application:${principal.applicationId}`,
        payload: {
          ...(request.reason !== undefined ? { reason: request.reason } : {}),
          previousExecutionId: before.execution.id,
          previousStatus: before.execution.status,
          executionNumber: execution.number,
          ...(plan ? { fromStep: request.fromStep, reusedSteps: reusedKeys } : {}),
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
              plan
                ? `execution #${execution.number} created (rerun of #${before.execution.number} from step ${request.fromStep})`
                : `execution #${execution.number} created (retry of #${before.execution.number})${request.reason !== undefined ? `: ${request.reason}` : ''}`,
              plan ? { fromStep: request.fromStep } : {},
              now,
            ),
            ...after.steps
              .filter((s) => s.reusedFromExecutionId !== null)
              .map((s) =>
                milestone(
                  deps.ids,
                  after,
                  'STEP_REUSED',
                  `step ${s.key} reused its output from an earlier execution; it does not run again`,
                  { stepId: s.key, reusedFromExecutionId: s.reusedFromExecutionId },
                  now,
                ),
              ),
            ...(started.write.timeline ?? []),
          ],
        },
      },
    );
    return toTaskView(after);
  });
}
