import type { TaskState } from '../facts/records.ts';

export interface TaskListFilter {
  limit: number;
  /** Id of the last task of the previous page (tasks come newest first). */
  before?: string;
  externalRef?: string;
  lifecycleStatus?: string;
  /** The children of this task (steps of kind `task`). */
  parentTaskId?: string;
}

/** Reads of tasks; every write goes through the status service's fact path. */
export interface TaskStore {
  getTask(applicationId: string, taskId: string): Promise<TaskState | null>;
  listTasks(applicationId: string, filter: TaskListFilter): Promise<TaskState[]>;
}

/** An application's unfinished (PENDING or RUNNING) tasks, counted up to `atMost` (the limit). */
export interface TasksInFlight {
  countInFlight(applicationId: string, atMost: number): Promise<number>;
}
