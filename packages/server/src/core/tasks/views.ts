import type { TaskWithExecution } from '@tdp/protocol';
import type { TaskState } from './model.ts';

/** The public JSON shape of a task with its current execution (versions as decimal strings). */
export function toTaskView({ task, execution, steps }: TaskState): TaskWithExecution {
  return {
    task: {
      id: task.id,
      applicationId: task.applicationId,
      workflowName: task.workflowName,
      workflowVersion: task.workflowVersion,
      name: task.name,
      externalRef: task.externalRef,
      input: task.input,
      callbackUrl: task.callbackUrl,
      priority: task.priority,
      ownerId: task.ownerId,
      lifecycleStatus: task.lifecycleStatus,
      version: task.version.toString(),
      currentExecutionId: task.currentExecutionId,
      createdAt: task.createdAt.toISOString(),
      updatedAt: task.updatedAt.toISOString(),
    },
    execution: {
      id: execution.id,
      number: execution.number,
      status: execution.status,
      progress: execution.progress,
      version: execution.version.toString(),
      createdAt: execution.createdAt.toISOString(),
      startedAt: execution.startedAt?.toISOString() ?? null,
      completedAt: execution.completedAt?.toISOString() ?? null,
      steps: steps.map((step) => ({
        id: step.id,
        key: step.key,
        capability: step.capability,
        capabilityVersion: step.capabilityVersion,
        dependsOn: step.dependsOn,
        status: step.status,
        version: step.version.toString(),
        createdAt: step.createdAt.toISOString(),
        updatedAt: step.updatedAt.toISOString(),
      })),
    },
  };
}
