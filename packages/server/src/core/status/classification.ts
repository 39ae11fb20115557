import type { ClassificationRequest, TaskWithExecution } from '@tdp/protocol';
import type { TaskState } from '../facts/records.ts';
import { inFactTransaction } from '../facts/session.ts';
import { toTaskView } from '../facts/views.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { AppError } from '../shared/errors.ts';
import type { StatusDeps } from './deps.ts';

/**
 * Binds a task type and status definition (once; then they are frozen) or changes the product label,
 * guarded by the task version the caller last saw (`If-Match`). Recorded as TASK_CLASSIFIED.
 */
export async function classifyTask(
  deps: StatusDeps,
  principal: ApplicationPrincipal,
  taskId: string,
  expectedVersion: bigint,
  request: ClassificationRequest,
): Promise<TaskWithExecution> {
  return inFactTransaction(deps, async (session) => {
    const before = await session.lockTask(taskId);
    if (!before || before.task.applicationId !== principal.applicationId)
      throw new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);
    if (before.task.version !== expectedVersion) {
      throw new AppError(
        'VERSION_MISMATCH',
        `task ${taskId} is at version ${before.task.version}, not ${expectedVersion}; read it again`,
      );
    }
    const { task } = before;
    const bindsType = request.taskType !== undefined || request.statusDefinitionVersion !== undefined;
    const taskType = request.taskType ?? task.taskType;
    const statusDefinitionVersion = request.statusDefinitionVersion ?? task.statusDefinitionVersion;
    if (
      bindsType &&
      task.statusDefinitionVersion !== null &&
      (taskType !== task.taskType || statusDefinitionVersion !== task.statusDefinitionVersion)
    ) {
      throw new AppError(
        'TASK_TYPE_FROZEN',
        `task ${taskId} is bound to ${task.taskType} v${task.statusDefinitionVersion}; that does not change`,
      );
    }
    if (statusDefinitionVersion !== null) {
      if (!taskType) throw new AppError('VALIDATION_FAILED', 'statusDefinitionVersion needs a taskType');
      const definition = await deps.registries.statusDefinition(
        task.applicationId,
        taskType,
        statusDefinitionVersion,
      );
      if (!definition)
        throw new AppError(
          'STATUS_DEFINITION_NOT_FOUND',
          `no status definition ${taskType} v${statusDefinitionVersion}`,
        );
    }
    const now = session.now;
    const after: TaskState = {
      ...before,
      task: {
        ...task,
        taskType,
        statusDefinitionVersion,
        productId: request.productId !== undefined ? request.productId : task.productId,
        version: task.version + 1n,
        updatedAt: now,
      },
    };
    await session.commit(
      before,
      after,
      {
        id: deps.ids.newId(),
        type: 'TASK_CLASSIFIED',
        producer: `application:${principal.applicationId}`,
        payload: {
          previous: {
            taskType: task.taskType,
            statusDefinitionVersion: task.statusDefinitionVersion,
            productId: task.productId,
          },
          current: { taskType, statusDefinitionVersion, productId: after.task.productId },
        },
        occurredAt: now,
        receivedAt: now,
      },
      { write: { task: after.task } },
    );
    return toTaskView(after);
  });
}
