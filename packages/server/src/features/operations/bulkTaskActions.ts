/** The operations context's `BulkTaskActions` port, over the tasks context's own cancel and retry. */
import type { BulkJobTask, BulkTaskActions, BulkTaskOutcome } from '../../core/operations/ports.ts';
import { AppError } from '../../core/shared/errors.ts';
import { type CancelDeps, cancelTaskChanged } from '../../core/tasks/cancelTask.ts';
import { retryTask } from '../../core/tasks/retryTask.ts';

/** A bulk job acts for the task's own application (the use cases check the task is its). */
const principalOf = (task: BulkJobTask) => ({
  kind: 'application' as const,
  tenantId: task.tenantId,
  applicationId: task.applicationId,
  keyId: 'tdp:operator',
  userView: 'APPLICATION' as const,
});

/** A refusal that means "nothing to do for this task" (it ended, is running, or is gone) is a skip. */
const nothingToDo = new Set(['INVALID_TRANSITION', 'TASK_NOT_FOUND']);

async function skippingRefusals(action: () => Promise<BulkTaskOutcome>): Promise<BulkTaskOutcome> {
  try {
    return await action();
  } catch (error) {
    if (error instanceof AppError && nothingToDo.has(error.code))
      return { outcome: 'SKIPPED', detail: `${error.code}: ${error.message}` };
    throw error;
  }
}

export function bulkTaskActions(deps: CancelDeps): BulkTaskActions {
  return {
    cancel: (task, reason, actor) =>
      skippingRefusals(async () => {
        const { changed } = await cancelTaskChanged(deps, principalOf(task), task.taskId, reason, actor);
        return changed ? { outcome: 'DONE' } : { outcome: 'SKIPPED', detail: 'already cancelled' };
      }),
    retry: (task, reason, actor) =>
      skippingRefusals(async () => {
        await retryTask(deps, principalOf(task), task.taskId, { reason, producer: actor });
        return { outcome: 'DONE' };
      }),
  };
}
