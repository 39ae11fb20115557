/**
 * What the HTTP routes read through, beyond the core's use cases: the run log of a task (timeline,
 * callback deliveries) and the operator dashboard's cross-tenant reads. The routes hold no SQL; the
 * postgres adapter implements these.
 */
import type { OperatorAuditRecord } from '../facts/records.ts';

/** One milestone of a task's timeline. */
export interface TimelineEntry {
  kind: string;
  message: string;
  data: Record<string, unknown>;
  at: Date;
  executionId: string;
}

/** A task's milestones and whether a task is an application's (the public API's run routes). */
export interface TaskRunReads {
  /** Whether the task exists and belongs to the application. */
  isApplicationTask(applicationId: string, taskId: string): Promise<boolean>;
  /** The task's milestones, in order. */
  timeline(taskId: string): Promise<TimelineEntry[]>;
}

/** One callback delivery of a task, with its outcome (as its table has it). */
export interface CallbackDeliveryRow {
  id: string;
  sequence: number;
  event_type: string;
  status: string;
  attempts: number;
  response_status: number | null;
  last_error: string | null;
  created_at: Date;
  published_at: Date | null;
}

export interface CallbackDeliveries {
  /** The task's deliveries, by execution then sequence. */
  forTask(taskId: string): Promise<CallbackDeliveryRow[]>;
  /** Puts a delivery of the application's back to be sent now; false if none (or it is being sent). */
  redeliver(applicationId: string, id: string, now: Date): Promise<boolean>;
}

/** One outbox-like table, as the dashboard's pipeline health page counts it. */
export interface PipelineRows {
  backlog(now: Date): Promise<Backlog>;
}

export interface DashboardTaskFilter {
  status?: string;
  applicationId?: string;
  workflow?: string;
  /** The tenants the reader sees (`all`: every tenant). */
  tenants: 'all' | string[];
  limit: number;
}

export interface DashboardTaskRow {
  id: string;
  tenantId: string;
  applicationId: string;
  applicationName: string;
  workflowName: string | null;
  workflowVersion: string | null;
  name: string;
  lifecycleStatus: string;
  health: string;
  version: bigint;
  progress: number;
  executionNumber: number;
  failure: unknown;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}

export interface DashboardTaskPage {
  /** Newest first. */
  items: DashboardTaskRow[];
  /** Tasks by lifecycle status under the application and workflow filters (not the status one). */
  counts: { lifecycleStatus: string; n: number }[];
  applications: { id: string; name: string; tenantId: string }[];
  /** The names of the published workflow definitions. */
  workflows: string[];
}

export interface DashboardAttemptRow {
  id: string;
  stepKey: string;
  attempt: number;
  workerId: string | null;
  workerName: string | null;
  nodeId: string | null;
  leaseVersion: number;
  status: string;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  revokedAt: Date | null;
}

export interface DashboardQueuedStep {
  taskId: string;
  taskName: string;
  stepKey: string;
  capability: string;
  capabilityVersion: string;
  reasons: unknown;
  createdAt: Date;
}

export interface DashboardWorkflowDefinition {
  id: string;
  name: string;
  version: string;
  tenantName: string;
  steps: { key: string; capability?: string; dependsOn?: string[] }[];
  publishedAt: Date;
}

/** The operator dashboard's reads: across tenants. */
export interface DashboardReads {
  tasks(filter: DashboardTaskFilter): Promise<DashboardTaskPage>;
  /** Every attempt of the task, oldest first, with its step and worker. */
  attempts(taskId: string): Promise<DashboardAttemptRow[]>;
  /** The oldest 200 steps waiting for a worker. */
  queuedSteps(): Promise<DashboardQueuedStep[]>;
  /** Running steps gone stale, and the steps waiting for a worker (with the oldest's creation). */
  stepHealth(): Promise<{ staleSteps: number; queued: { count: number; oldest: Date | null } }>;
  /** Every published workflow definition, by name then newest first. */
  workflowDefinitions(tenants: 'all' | string[]): Promise<DashboardWorkflowDefinition[]>;
}

/** A page of the operator audit, newest first; `before` continues after the last row of a page. */
export interface AuditQuery {
  subjectId?: string;
  action?: string;
  operatorId?: string;
  tenantId?: string;
  taskId?: string;
  /** Created at or after, and before. */
  from?: Date;
  to?: Date;
  /** The tenants the caller reaches: rows of other tenants, and the platform's own, are left out… */
  tenants: 'all' | string[];
  /** …but for the caller's own actions, which they always see (null: the bootstrap token). */
  self: string | null;
  before?: { createdAt: Date; id: string };
  limit: number;
}

export interface AuditPage {
  items: OperatorAuditRecord[];
  /** Where the next page starts (null: this is the last). */
  next: { createdAt: Date; id: string } | null;
}

/** The operator audit, as the admin API reads it. */
export interface OperatorAudit {
  auditPage(query: AuditQuery): Promise<AuditPage>;
}

export type DeadLetterTable = 'outbox' | 'realtime' | 'callbacks';

/** Which DEAD rows: those named, or those matching every field of the filter given. */
export interface DeadLetterSelection {
  ids?: string[];
  filter?: {
    /** Created at or after. */
    createdFrom?: Date;
    /** Created before. */
    createdTo?: Date;
    /** The last error contains this text (case-insensitive). */
    errorContains?: string;
    /** The row's application (a realtime row: its task's). */
    applicationId?: string;
  };
}

export interface DeadLetters {
  /**
   * Puts the table's DEAD rows of `selection` (at most `limit`, the oldest first) back to be sent now,
   * as a redelivery resets one; rows that are not DEAD are left alone. Writes the audit record (with the
   * ids requeued) in the same transaction; returns the ids requeued.
   */
  requeueDead(
    table: DeadLetterTable,
    selection: DeadLetterSelection,
    limit: number,
    audit: OperatorAuditRecord,
    now: Date,
  ): Promise<string[]>;
}

/** Which tasks a bulk cancel or retry takes (at least one field; every given field must match). */
export interface BulkTaskFilter {
  /** The task's lifecycle status. */
  status?: string;
  applicationId?: string;
  workflowName?: string;
  /** Created at or after this instant. */
  createdFrom?: string;
  /** Created before this instant. */
  createdTo?: string;
}

export type BulkAction = 'CANCEL' | 'RETRY';
export type BulkJobStatus = 'RUNNING' | 'SUCCEEDED' | 'FAILED';

export interface BulkJobRecord {
  id: string;
  action: BulkAction;
  /** `<operator id or "bootstrap"> <the request's Idempotency-Key>`: each operator's keys are their own. */
  idempotencyKey: string;
  requestHash: string;
  filter: BulkTaskFilter;
  /** The tenants the job may touch (its operator's reach when it was created); null: every tenant. */
  tenantIds: string[] | null;
  reason: string;
  /** The producer of the cancels and retries it makes: `operator:<name>`. */
  actor: string;
  status: BulkJobStatus;
  matched: number;
  done: number;
  failed: number;
  skipped: number;
  /** Position of the last task handled (0: none yet). */
  cursor: number;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

/** One task a job froze when it was created, with where it stands in the job. */
export interface BulkJobTask {
  position: number;
  taskId: string;
  tenantId: string;
  applicationId: string;
}

export type BulkTaskOutcome = { outcome: 'DONE' } | { outcome: 'SKIPPED' | 'FAILED'; detail: string };

export interface BulkJobStore {
  /**
   * Creates the job with the tasks its filter matches now (at most `limit`, oldest first) and its
   * audit record, in one transaction. `tooMany` (nothing written) when more than `limit` match;
   * `taken` (nothing written) when the idempotency key already names a job.
   */
  create(
    job: BulkJobRecord,
    limit: number,
    audit: OperatorAuditRecord,
  ): Promise<{ kind: 'created'; matched: number } | { kind: 'tooMany' } | { kind: 'taken' }>;
  findByKey(idempotencyKey: string): Promise<BulkJobRecord | null>;
  get(id: string): Promise<BulkJobRecord | null>;
  /** Takes one RUNNING job nobody holds (or whose claim expired), SKIP LOCKED; null when none. */
  claim(claimId: string, now: Date, expiresAt: Date): Promise<BulkJobRecord | null>;
  /** The job's tasks after its cursor, in order (at most `limit`). */
  tasksAfter(jobId: string, cursor: number, limit: number): Promise<BulkJobTask[]>;
  /**
   * Records one task's outcome and moves the cursor to it, renewing the claim; false (nothing written)
   * when the claim is no longer this one's (another replica took the job over).
   */
  recordOutcome(
    jobId: string,
    claimId: string,
    task: BulkJobTask,
    outcome: BulkTaskOutcome,
    now: Date,
    expiresAt: Date,
  ): Promise<boolean>;
  /** Lets go of the job (under its claim), so the next round of any replica takes it at once. */
  release(jobId: string, claimId: string): Promise<void>;
  /** Ends the job (under its claim) and lets go of it. */
  finish(jobId: string, claimId: string, status: 'SUCCEEDED' | 'FAILED', now: Date): Promise<void>;
  /** When the earliest claim of a RUNNING job expires (now when one is unclaimed); null: no job runs. */
  nextDueAt(now: Date): Promise<Date | null>;
}

/**
 * The tasks context's cancel and retry, as a bulk job uses them (a port: wired in the operations feature
 * over the use cases). The answer says whether the task was changed or left as it was, and why.
 */
export interface BulkTaskActions {
  cancel(task: BulkJobTask, reason: string, actor: string): Promise<BulkTaskOutcome>;
  retry(task: BulkJobTask, reason: string, actor: string): Promise<BulkTaskOutcome>;
}

/** The outbox, realtime relay and callback tables, as the backlog metrics name them. */
export type BacklogTable = 'outbox' | 'realtime' | 'callbacks';

export interface Backlog {
  /** Rows not yet published, by status (PENDING, PUBLISHING, FAILED, DEAD). */
  byStatus: Record<string, number>;
  /** Age of the oldest row still to publish (DEAD ones excluded: nobody retries them), seconds. */
  oldestAgeSeconds: number;
}

/** The Temporal engine's JetStream bridge: the events it still has to hand on (docs/temporal.md). */
export interface EngineBridgeBacklog {
  /** Events in JetStream not given to the bridge yet; null when JetStream did not answer. */
  pending: number | null;
  /** Given to it and not acked yet: in hand, or failed and waiting to be delivered again. */
  unacked: number | null;
  /** How long the oldest of them has waited; null when none waits (or JetStream did not answer). */
  oldestAgeMs: number | null;
  /** Whether this replica's Temporal worker and bridge are connected; null when it runs none. */
  connected: boolean | null;
}

export interface EngineBridgeReads {
  backlog(now: Date): Promise<EngineBridgeBacklog>;
}

/** What the gauges read at each scrape (PostgreSQL's backlogReads.ts). */
export interface BacklogReads {
  backlog(table: BacklogTable, now: Date): Promise<Backlog>;
  staleSteps(): Promise<number>;
}
