import type { TaskState } from './model.ts';

/** The remembered answer to one write, keyed by who asked, what they asked for and their key. */
export interface IdempotencyRecord {
  principal: string;
  operation: string;
  key: string;
  requestHash: string;
  responseStatus: number;
  responseBody: unknown;
  createdAt: Date;
}

export interface TaskListFilter {
  limit: number;
  /** Id of the last task of the previous page (tasks come newest first). */
  before?: string;
  externalRef?: string;
  lifecycleStatus?: string;
}

/** Reads of tasks; every write goes through the status service's fact path. */
export interface TaskStore {
  getTask(applicationId: string, taskId: string): Promise<TaskState | null>;
  listTasks(applicationId: string, filter: TaskListFilter): Promise<TaskState[]>;
}

/** Wakes the outbox dispatcher after a commit that wrote outbox rows; a hint, never required. */
export interface OutboxSignal {
  outboxWritten(): void;
}
