/**
 * A parent task and its child tasks (steps of kind `task`) keep their facts in their own transactions.
 * Each tells the other through a timer row, due at once. The row is written with the fact that causes
 * it, whatever path that fact took (a step's end, a cancel, a forced cancel). The timers loop then
 * applies it to the other task in that task's own transaction.
 * - CHILD_FINISHED, on the parent: the child's execution ended, so the parent's waiting step ends too.
 * - CANCEL_CHILD, on the child: the parent's step that waits for it was cancelled, so the child is too.
 */
import { isTerminal } from './execution.ts';
import type { TaskState, TimerRecord } from './records.ts';

export function familyTimers(
  before: TaskState | null,
  after: TaskState,
  newId: () => string,
  at: Date,
): TimerRecord[] {
  const timers: TimerRecord[] = [];
  const { task } = after;
  const ended = isTerminal(after.execution.status) && !(before && isTerminal(before.execution.status));
  if (task.parentTaskId && ended) {
    timers.push({
      id: newId(),
      kind: 'CHILD_FINISHED',
      taskId: task.parentTaskId,
      stepId: task.parentStepId,
      payload: { childTaskId: task.id, status: after.execution.status },
      availableAt: at,
      createdAt: at,
    });
  }
  const waiting = before?.steps.filter((s) => s.waitingFor?.kind === 'task' && s.status !== 'CANCELLED');
  for (const was of waiting ?? []) {
    const now = after.steps.find((s) => s.id === was.id);
    const childTaskId = was.waitingFor?.kind === 'task' ? was.waitingFor.childTaskId : null;
    if (now?.status !== 'CANCELLED' || !childTaskId) continue;
    timers.push({
      id: newId(),
      kind: 'CANCEL_CHILD',
      taskId: childTaskId,
      stepId: null,
      payload: { parentTaskId: task.id, tenantId: task.tenantId, applicationId: task.applicationId },
      availableAt: at,
      createdAt: at,
    });
  }
  return timers;
}
