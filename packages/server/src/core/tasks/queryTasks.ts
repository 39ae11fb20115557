import type { TaskPage, TaskWithExecution } from '@tdp/protocol';
import { toTaskView } from '../facts/views.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import type { ArchivedTasks } from '../retention/ports.ts';
import { AppError, archivedTaskError } from '../shared/errors.ts';
import type { TaskStore } from './ports.ts';

/** Another application's task is reported as missing, never as forbidden: its existence is not ours to know. */
export async function getTask(
  tasks: TaskStore,
  principal: ApplicationPrincipal,
  taskId: string,
  archived?: ArchivedTasks,
): Promise<TaskWithExecution> {
  const state = await tasks.getTask(principal.applicationId, taskId);
  if (!state) {
    const tombstone = await archived?.find(taskId);
    if (tombstone?.applicationId === principal.applicationId) throw archivedTaskError(tombstone);
    throw new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);
  }
  return toTaskView(state);
}

export async function listTasks(
  tasks: TaskStore,
  principal: ApplicationPrincipal,
  query: {
    limit: number;
    cursor?: string;
    externalRef?: string;
    lifecycleStatus?: string;
    parentTaskId?: string;
  },
): Promise<TaskPage> {
  const rows = await tasks.listTasks(principal.applicationId, {
    limit: query.limit + 1,
    ...(query.cursor ? { before: query.cursor } : {}),
    ...(query.externalRef ? { externalRef: query.externalRef } : {}),
    ...(query.lifecycleStatus ? { lifecycleStatus: query.lifecycleStatus } : {}),
    ...(query.parentTaskId ? { parentTaskId: query.parentTaskId } : {}),
  });
  const page = rows.slice(0, query.limit);
  return {
    items: page.map(toTaskView),
    nextCursor: rows.length > query.limit ? (page.at(-1)?.task.id ?? null) : null,
  };
}
