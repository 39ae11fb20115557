import type {
  CreateTaskRequest,
  DebounceOutcome,
  SingletonOutcome,
  StepDefinition,
  TaskWithExecution,
} from '@tdp/protocol';
import { isTerminal } from '../facts/execution.ts';
import type { FactSession } from '../facts/session.ts';
import { toTaskView } from '../facts/views.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { AppError } from '../shared/errors.ts';
import { type CancelDeps, cancelInSession } from './cancelTask.ts';

/**
 * Debounce and singleton keys of a create (docs/scheduling.md). Both are the application's own: a key
 * names one kind of its submissions, and a debounce cancels the task it replaces, which only the
 * application that created it may do. Each key has one holder row (task_key_slot), locked by the create
 * before it reads it, so concurrent creates with one key take turns.
 */

/** A create's answer: the task, and with a debounce or a singleton what the create did. */
export type CreateAnswer = TaskWithExecution & { debounce?: DebounceOutcome; singleton?: SingletonOutcome };

/** What the keys let the create do: nothing (a debounce kept the waiting task), or create. */
export type KeyClaim =
  | { kind: 'dropped'; answer: CreateAnswer }
  | { kind: 'create'; debounce?: DebounceOutcome; singleton?: SingletonOutcome };

/**
 * A debounced task's first steps wait out the window before their own delay: the window restarts with
 * each task that replaces the one waiting, and the one left when it ends runs.
 */
export function debouncedSteps(steps: StepDefinition[], windowMs: number | undefined): StepDefinition[] {
  if (!windowMs) return steps;
  return steps.map((step) =>
    step.dependsOn.length === 0 ? { ...step, startDelayMs: (step.startDelayMs ?? 0) + windowMs } : step,
  );
}

/**
 * Takes the create's keys for `taskId`, the task it is about to create. Debounce: a task of the key
 * still in its window is kept (`first`: nothing is created) or cancelled for this one (`last`).
 * Singleton: a task of the key not finished refuses the create (SINGLETON_RUNNING), or with `wait` the
 * task is created without the key: its steps are parked when placed until it takes the key
 * (placement.ts; the holder's finishing commit hands it on, taskKeyTables.ts). A refusal rolls the
 * transaction back, the cancel with it.
 */
export async function claimTaskKeys(
  deps: CancelDeps,
  session: FactSession,
  principal: ApplicationPrincipal,
  request: Pick<CreateTaskRequest, 'debounce' | 'singleton'>,
  taskId: string,
): Promise<KeyClaim> {
  const { applicationId } = principal;
  const now = session.now;
  let debounce: DebounceOutcome | undefined;
  if (request.debounce) {
    const { key, windowMs, keep } = request.debounce;
    const slot = await session.tx.lockTaskKeySlot('debounce', applicationId, key);
    const waiting =
      slot?.windowEndsAt && slot.windowEndsAt.getTime() > now.getTime()
        ? await session.lockTask(slot.taskId)
        : null;
    // Still in its window and not cancelled meanwhile: its steps have not started.
    if (waiting && waiting.task.lifecycleStatus === 'PENDING') {
      if (keep === 'first') {
        const dropped: DebounceOutcome = { outcome: 'dropped', taskId: waiting.task.id };
        return { kind: 'dropped', answer: { ...toTaskView(waiting), debounce: dropped } };
      }
      await cancelInSession(
        deps,
        session,
        principal,
        waiting.task.id,
        `debounced: replaced by task ${taskId} (debounce key "${key}")`,
      );
      debounce = { outcome: 'replaced', taskId, replacedTaskId: waiting.task.id };
    } else {
      debounce = { outcome: 'created', taskId };
    }
    const windowEndsAt = new Date(now.getTime() + windowMs);
    await session.tx.setTaskKeySlot('debounce', applicationId, key, { taskId, windowEndsAt }, now);
  }
  let singleton: SingletonOutcome | undefined;
  if (request.singleton) {
    const { key, whenRunning } = request.singleton;
    const slot = await session.tx.lockTaskKeySlot('singleton', applicationId, key);
    const holder = slot ? await session.lockTask(slot.taskId) : null;
    // The holder keeps the key until its task is finished (a task archived since holds nothing).
    if (holder && !isTerminal(holder.execution.status)) {
      if (whenRunning === 'refuse')
        throw new AppError(
          'SINGLETON_RUNNING',
          `task ${holder.task.id} with singleton key "${key}" is not finished yet; retry once it is`,
        );
      singleton = { outcome: 'waiting', heldBy: holder.task.id };
    } else {
      await session.tx.setTaskKeySlot('singleton', applicationId, key, { taskId, windowEndsAt: null }, now);
      singleton = { outcome: 'holder' };
    }
  }
  return { kind: 'create', ...(debounce ? { debounce } : {}), ...(singleton ? { singleton } : {}) };
}
