/** The orchestration context's `ChildTaskCancel` port, over the tasks context's own cancel. */
import type { ChildTaskCancel } from '../../core/orchestration/ports.ts';
import { AppError } from '../../core/shared/errors.ts';
import { type CancelDeps, cancelTask } from '../../core/tasks/cancelTask.ts';

export function childTaskCancel(deps: CancelDeps): ChildTaskCancel {
  return {
    cancel: async ({ taskId, tenantId, applicationId }, reason) => {
      const principal = {
        kind: 'application' as const,
        tenantId,
        applicationId,
        keyId: 'tdp:parent-task',
        userView: 'APPLICATION' as const,
      };
      try {
        await cancelTask(deps, principal, taskId, reason);
      } catch (error) {
        // It ended on its own meanwhile (or is gone): nothing is left to cancel.
        if (error instanceof AppError && ['INVALID_TRANSITION', 'TASK_NOT_FOUND'].includes(error.code))
          return;
        throw error;
      }
    },
  };
}
