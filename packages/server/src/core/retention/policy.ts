/**
 * What the retention sweep keeps and for how long (docs/retention.md). Pure: the windows come from the
 * settings, the cut-offs from the clock.
 *
 * Two kinds of policy: a finished task's history is archived (written to the archive, checked, then
 * deleted, see sweep.ts); the other tables hold delivery or bookkeeping rows that nobody reads once
 * they are done, so they are deleted after their window, without an archive.
 */
import { type ClaimPolicy, claimPolicy } from '../outbox/policy.ts';

const dayMs = 86_400_000;

/** The windows, in days, one setting per table (the retention feature's `retention` setting). */
export interface RetentionWindows {
  /** A finished task's history (`TDP_RETENTION_DAYS`). */
  taskDays: number;
  /** Published domain events (outbox_event). */
  outboxDays: number;
  /** Published realtime projections (realtime_outbox). */
  realtimeDays: number;
  /** Delivered callbacks (callback_delivery). */
  callbackDays: number;
  /** Answers kept for Idempotency-Key retries (idempotency). */
  idempotencyDays: number;
  /** Events a consumer has applied (consumer_inbox). */
  consumerInboxDays: number;
  /** Worker commands the worker acknowledged (worker_command). */
  commandDays: number;
  /** Timers that fired (timer). */
  timerDays: number;
  /** Access grants past their expiry (access_grant). */
  grantDays: number;
  /** Finished bulk operator jobs and their frozen task lists (bulk_job, bulk_job_task). */
  bulkJobDays: number;
}

const windowNames: (keyof RetentionWindows)[] = [
  'taskDays',
  'outboxDays',
  'realtimeDays',
  'callbackDays',
  'idempotencyDays',
  'consumerInboxDays',
  'commandDays',
  'timerDays',
  'grantDays',
  'bulkJobDays',
];

/** The tables of one task's history, parents first (restore inserts in this order, the sweep deletes in reverse). */
export const taskHistoryTables = [
  'task',
  'execution',
  'step',
  'attempt',
  'access_grant',
  'map_item',
  'task_event',
  'event_dedup',
  'timeline',
  'task_acl',
  'task_external_ref',
  'scheduling_request',
  'timer',
  'callback_delivery',
  'task_signal',
  'step_decision',
  'user_notification',
] as const;
export type TaskHistoryTable = (typeof taskHistoryTables)[number];

/** A delete-only policy: which rows of `table` are done, and since when. */
export interface DeletePolicy {
  table: DeleteOnlyTable;
  windowDays: number;
}

export const deleteOnlyTables = [
  'outbox_event',
  'realtime_outbox',
  'callback_delivery',
  'idempotency',
  'consumer_inbox',
  'worker_command',
  'timer',
  'access_grant',
  // A job's task list first: the job row goes once its list is gone, so no delete cascades a long list.
  'bulk_job_task',
  'bulk_job',
] as const;
export type DeleteOnlyTable = (typeof deleteOnlyTables)[number];

export function deletePolicies(windows: RetentionWindows): DeletePolicy[] {
  const days: Record<DeleteOnlyTable, number> = {
    outbox_event: windows.outboxDays,
    realtime_outbox: windows.realtimeDays,
    callback_delivery: windows.callbackDays,
    idempotency: windows.idempotencyDays,
    consumer_inbox: windows.consumerInboxDays,
    worker_command: windows.commandDays,
    timer: windows.timerDays,
    access_grant: windows.grantDays,
    bulk_job_task: windows.bulkJobDays,
    bulk_job: windows.bulkJobDays,
  };
  return deleteOnlyTables.map((table) => ({ table, windowDays: days[table] }));
}

/** Rows done before this are swept. */
export function cutoff(now: Date, windowDays: number): Date {
  return new Date(now.getTime() - windowDays * dayMs);
}

/** The archive day (UTC) of a batch written at `now`: the directory its files go under. */
export function archiveDay(now: Date): string {
  return now.toISOString().slice(0, 10);
}

/**
 * The longest a producer keeps retrying one write: every failure of an outbox-like row waits up to the
 * policy's back-off, until it is DEAD. Records that make retries harmless (idempotency answers, event
 * dedup) must outlive it, or a late retry would be taken for a new request.
 */
export function longestRetryWindowMs(policy: ClaimPolicy = claimPolicy): number {
  let total = 0;
  for (let attempt = 1; attempt <= policy.maxAttempts; attempt += 1)
    total += Math.min(2 ** attempt, policy.maxBackoffSeconds) * 1000 + policy.leaseMs;
  return total;
}

/** Why a set of windows is refused, or null: a dedup or idempotency record must outlive every retry. */
export function windowsProblem(windows: RetentionWindows): string | null {
  // Only the windows: the settings handed in may carry the sweep's other fields (sizes, the on/off switch).
  for (const name of windowNames) {
    const value = windows[name];
    if (!Number.isInteger(value) || value < 1) return `${name} must be a whole number of days, at least 1`;
  }
  const longest = longestRetryWindowMs();
  // A bulk job's row is its Idempotency-Key's record.
  if ([windows.idempotencyDays, windows.taskDays, windows.bulkJobDays].some((d) => d * dayMs < longest))
    return `idempotency, event dedup and bulk job records must be kept longer than the longest retry (${Math.ceil(longest / 3_600_000)} h)`;
  return null;
}

/** The checksum manifest entry of one table's rows in a batch. */
export interface ArchivedTable {
  table: TaskHistoryTable;
  rows: number;
  /** sha256 (hex) of the NDJSON text: each row as PostgreSQL's row_to_json, one per line. */
  contentSha256: string;
}
