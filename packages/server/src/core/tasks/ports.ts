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

/** An application's unfinished (PENDING or RUNNING) tasks against its limit. */
export interface TasksInFlight {
  /**
   * The application's limit (its own quota when an operator set one, else `platformLimit`; `0`: none)
   * and its unfinished tasks, counted up to that limit.
   */
  inFlight(applicationId: string, platformLimit: number): Promise<InFlightCount>;
}

export interface InFlightCount {
  count: number;
  /** `0`: no limit. */
  limit: number;
}
