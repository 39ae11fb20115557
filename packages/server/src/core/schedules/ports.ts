import type { ScheduleOverlap } from '@tdp/protocol';

export interface ScheduleRecord {
  id: string;
  tenantId: string;
  applicationId: string;
  idempotencyKey: string;
  requestHash: string;
  cron: string;
  timeZone: string;
  workflowName: string;
  workflowVersion: string;
  input: unknown;
  overlap: ScheduleOverlap;
  startAt: Date | null;
  endAt: Date | null;
  paused: boolean;
  nextFireAt: Date | null;
  queuedFireAt: Date | null;
  lastFireAt: Date | null;
  lastTaskId: string | null;
  lastError: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** What one round of the schedule loop writes back to a schedule it holds. */
export type ScheduleAdvance = Pick<
  ScheduleRecord,
  'nextFireAt' | 'queuedFireAt' | 'lastFireAt' | 'lastTaskId' | 'lastError'
>;

export interface ScheduleStore {
  /** False when the application already has a schedule with this idempotency key. */
  insert(schedule: ScheduleRecord): Promise<boolean>;
  findByKey(applicationId: string, idempotencyKey: string): Promise<ScheduleRecord | null>;
  /** How many schedules the application has (paused ones too), counted up to `atMost`. */
  countForApplication(applicationId: string, atMost: number): Promise<number>;
  get(applicationId: string, id: string): Promise<ScheduleRecord | null>;
  list(applicationId: string, limit: number): Promise<ScheduleRecord[]>;
  /** Every application's schedules, for operators. */
  /** The newest schedules of the tenants named (`all`: every tenant's). */
  listAll(limit: number, tenants: 'all' | string[]): Promise<ScheduleRecord[]>;
  setPaused(
    applicationId: string,
    id: string,
    change: { paused: boolean; nextFireAt: Date | null },
    now: Date,
  ): Promise<ScheduleRecord | null>;
  /**
   * Locks up to `limit` schedules that are due at `now` or hold a queued fire, skipping those another
   * replica holds; `handle` decides each (and starts its tasks), and its advance is written in the same
   * transaction that held the lock. Returns how many it held.
   */
  withDue(
    now: Date,
    limit: number,
    handle: (schedule: ScheduleRecord) => Promise<ScheduleAdvance>,
  ): Promise<number>;
  /** The earliest next fire time of an unpaused schedule. */
  nextDueAt(): Promise<Date | null>;
}

/**
 * The tasks a schedule starts, through the tasks context's own create path (wired in the composition
 * root: a use case never calls another context's use case).
 */
export interface ScheduledTasks {
  /** Creates (or, for a key already used, finds) the task; throws AppError when it is refused. */
  start(
    schedule: ScheduleRecord,
    idempotencyKey: string,
    fireAt: Date,
    input: unknown,
  ): Promise<{ taskId: string }>;
  /** True while the task has not ended. */
  isRunning(applicationId: string, taskId: string): Promise<boolean>;
}
