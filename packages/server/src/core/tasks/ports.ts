import type {
  ExecutionRecord,
  OutboxRecord,
  StepRecord,
  TaskEventRecord,
  TaskRecord,
  TaskState,
} from './model.ts';

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

/** Everything one new task writes, committed together. */
export interface NewTaskGraph {
  task: TaskRecord;
  execution: ExecutionRecord;
  steps: StepRecord[];
  event: TaskEventRecord;
  outbox: OutboxRecord[];
}

/** A state change of an existing task, with the fact that explains it. */
export interface TaskChange {
  task: TaskRecord;
  execution: ExecutionRecord;
  steps: StepRecord[];
  event: TaskEventRecord;
  outbox: OutboxRecord[];
}

export interface TaskTransaction {
  /** The task with its current execution and steps, locked until the transaction ends. */
  lockTask(applicationId: string, taskId: string): Promise<TaskState | null>;
  saveChange(change: TaskChange): Promise<void>;
}

export interface TaskListFilter {
  limit: number;
  /** Id of the last task of the previous page (tasks come newest first). */
  before?: string;
  externalRef?: string;
  lifecycleStatus?: string;
}

export interface TaskStore {
  /**
   * Atomically records the idempotency entry and the new task graph, unless (principal, operation, key)
   * already has an entry: then nothing is written and the existing entry is returned (after waiting for
   * a concurrent writer of the same key to finish). Returns null when the task was created.
   */
  createTask(idempotency: IdempotencyRecord, graph: NewTaskGraph): Promise<IdempotencyRecord | null>;
  transaction<T>(work: (tx: TaskTransaction) => Promise<T>): Promise<T>;
  getTask(applicationId: string, taskId: string): Promise<TaskState | null>;
  listTasks(applicationId: string, filter: TaskListFilter): Promise<TaskState[]>;
}

/** Wakes the outbox dispatcher after a commit that wrote outbox rows; a hint, never required. */
export interface OutboxSignal {
  outboxWritten(): void;
}
