/** The schedules context's `ScheduledTasks` port, over the tasks context's own create path. */
import type { ScheduledTasks, ScheduleRecord } from '../../core/schedules/ports.ts';
import { type CreateTaskDeps, createTask } from '../../core/tasks/createTask.ts';
import type { TaskStore } from '../../core/tasks/ports.ts';

export function scheduledTasks(create: CreateTaskDeps, tasks: TaskStore): ScheduledTasks {
  return {
    start: async (schedule: ScheduleRecord, idempotencyKey: string, fireAt: Date, input: unknown) => {
      const principal = {
        kind: 'application' as const,
        tenantId: schedule.tenantId,
        applicationId: schedule.applicationId,
        keyId: `schedule:${schedule.id}`,
        userView: 'APPLICATION' as const,
      };
      const result = await createTask(create, principal, idempotencyKey, {
        workflowName: schedule.workflowName,
        workflowVersion: schedule.workflowVersion,
        name: `${schedule.workflowName} at ${fireAt.toISOString()}`,
        externalRef: `schedule:${schedule.id}`,
        input,
      });
      return { taskId: result.body.task.id };
    },
    isRunning: async (applicationId: string, taskId: string) => {
      const state = await tasks.getTask(applicationId, taskId);
      return (
        state !== null &&
        (state.task.lifecycleStatus === 'PENDING' || state.task.lifecycleStatus === 'RUNNING')
      );
    },
  };
}
