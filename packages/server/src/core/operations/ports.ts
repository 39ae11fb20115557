/**
 * What the HTTP routes read through, beyond the core's use cases: the run log of a task (timeline,
 * callback deliveries) and the operator dashboard's cross-tenant reads. The routes hold no SQL; the
 * postgres adapter implements these.
 */
import type { OperatorAuditRecord } from '../scheduling/ports.ts';

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
  countByStatus(): Promise<Record<string, number>>;
  oldestUnpublishedAgeSeconds(now: Date): Promise<number>;
}

export interface DashboardTaskFilter {
  status?: string;
  applicationId?: string;
  workflow?: string;
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
  workflowDefinitions(): Promise<DashboardWorkflowDefinition[]>;
}

/** A page of the operator audit, newest first; `before` continues after the last row of a page. */
export interface AuditQuery {
  subjectId?: string;
  action?: string;
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
