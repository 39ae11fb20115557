import type { TaskWithExecution } from '@tdp/protocol';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import { isTerminal, lifecycleOf, planCancel, transitionExecution } from './execution.ts';
import type { StepRecord } from './model.ts';
import { outboxFor } from './outboxEvents.ts';
import type { OutboxSignal, TaskStore } from './ports.ts';
import { toTaskView } from './views.ts';

export interface CancelTaskDeps {
  tasks: TaskStore;
  clock: Clock;
  ids: IdGenerator;
  signal: OutboxSignal;
}

const finishedSteps = new Set<StepRecord['status']>(['SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELED']);

/**
 * Cancels the task's current execution. Idempotent: cancelling a cancelled (or cancelling) task answers
 * with its state and records nothing new; a finished task cannot be cancelled.
 */
export async function cancelTask(
  deps: CancelTaskDeps,
  principal: ApplicationPrincipal,
  taskId: string,
  reason: string | null,
): Promise<TaskWithExecution> {
  const { view, wrote } = await deps.tasks.transaction(async (tx) => {
    const state = await tx.lockTask(principal.applicationId, taskId);
    if (!state) throw new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);
    const plan = planCancel(state.execution.status);
    if (plan.kind === 'already') return { view: toTaskView(state), wrote: false };
    if (plan.kind === 'refused') {
      throw new AppError(
        'INVALID_TRANSITION',
        `task ${taskId} already ended with ${plan.status}; it cannot be cancelled`,
      );
    }
    const now = deps.clock.now();
    const execution = transitionExecution(state.execution, plan.to, now);
    const steps =
      plan.to === 'CANCELED'
        ? state.steps.map((step) =>
            finishedSteps.has(step.status)
              ? step
              : { ...step, status: 'CANCELED' as const, version: step.version + 1n, updatedAt: now },
          )
        : state.steps;
    const task = {
      ...state.task,
      lifecycleStatus: lifecycleOf(execution.status),
      version: state.task.version + 1n,
      updatedAt: now,
    };
    const event = {
      id: deps.ids.newId(),
      taskId: task.id,
      executionId: execution.id,
      taskVersion: task.version,
      type: isTerminal(execution.status) ? 'execution.canceled' : 'execution.canceling',
      producer: `application:${principal.applicationId}`,
      payload: { status: execution.status, previousStatus: state.execution.status, reason },
      occurredAt: now,
    };
    await tx.saveChange({ task, execution, steps, event, outbox: [outboxFor(task, event)] });
    return { view: toTaskView({ task, execution, steps }), wrote: true };
  });
  if (wrote) deps.signal.outboxWritten();
  return view;
}
