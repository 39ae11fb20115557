import type { RealtimeRecord, TaskState } from './model.ts';

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

/** What a commit wrote that a background loop works off. */
export interface CommittedWork {
  outbox: boolean;
  scheduling: boolean;
  callbacks: boolean;
  /** The earliest due time among the timers it wrote. */
  earliestTimer: Date | null;
  /** Realtime rows to publish now (see `OutboxSignal.realtimeHandoff`). */
  realtime: RealtimeRecord[];
}

/**
 * Wakes the loops that have new work after a commit; a hint, never required (each loop also polls).
 * Only those with new rows: waking every loop on every commit cost a query per loop per commit.
 */
export interface OutboxSignal {
  committed(work: CommittedWork): void;
  /** When set, realtime rows are handed over in `committed` for publishing at once. */
  readonly realtimeHandoff?: RealtimeHandoffMode;
  /**
   * False when no event bus is configured: facts then write no domain outbox rows (the task's event log
   * stays the record; an outbox row would only be claimed, handed to nobody and marked). Default true.
   */
  readonly domainEvents?: boolean;
}

/**
 * - `durable`: the rows are also written, claimable by the relay's loop only `graceMs` later (it takes
 *   what the hand-off failed to publish) — for a gateway that outlives this process (Redis, HTTP API).
 * - `memoryOnly`: the rows are not written at all — for the in-process memory gateway, whose channels
 *   die with the process: after a crash every client reloads a snapshot, so a stored row would buy
 *   nothing.
 */
export type RealtimeHandoffMode = { kind: 'durable'; graceMs: number } | { kind: 'memoryOnly' };
