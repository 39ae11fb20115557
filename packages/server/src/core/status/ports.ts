/**
 * Status glossary (source document 002, DESIGN.md §5)
 * - fact: an accepted event; it gets the next task version (and step version), a row in the immutable
 *   event log, a dedup record, an outbox event and realtime projections — all in one transaction.
 * - coordinator: the application that owns the task; only it ends a task (TASK_COMPLETED / TASK_FAILED).
 * - execution credential: a signed token or a compact handle bound to task, step, attempt, execution
 *   instance, operation, producer and allowed event types; revoked when the step attempt ends.
 * - registry: versioned status definitions (business status → lifecycle) and operation definitions
 *   (producer, event types, data schemas); a task or step binds one version and keeps it.
 */
import type { FailurePolicy, LifecycleStatus, StatusDefinitionEntry } from '@tdp/protocol';
import type {
  AclEntry,
  ExecutionRecord,
  OutboxRecord,
  RealtimeRecord,
  StepRecord,
  TaskEventRecord,
  TaskRecord,
  TaskState,
  WorkflowRecord,
} from '../tasks/model.ts';
import type { IdempotencyRecord } from '../tasks/ports.ts';

export interface AttemptRecord {
  id: string;
  taskId: string;
  stepId: string;
  applicationId: string;
  operationCode: string;
  producerId: string;
  allowedEventTypes: string[];
  handleHash: Buffer;
  expiresAt: Date;
  revokedAt: Date | null;
  createdAt: Date;
}

export interface DedupRecord {
  eventId: string;
  taskId: string;
  payloadHash: string;
  result: Record<string, unknown>;
  createdAt: Date;
}

/** Everything one fact (or one creation) writes; the store sends it in one round of statements. */
export interface FactWrite {
  newWorkflow?: WorkflowRecord;
  newTask?: { task: TaskRecord; execution: ExecutionRecord };
  workflow?: WorkflowRecord;
  task?: TaskRecord;
  execution?: ExecutionRecord;
  newSteps?: StepRecord[];
  steps?: StepRecord[];
  attempts?: AttemptRecord[];
  revokeAttemptIds?: string[];
  events: TaskEventRecord[];
  dedup?: DedupRecord[];
  outbox: OutboxRecord[];
  realtime: RealtimeRecord[];
}

export interface StatusTransaction {
  /** The task with its current execution and that execution's step rows, locked until commit. */
  lockTask(taskId: string): Promise<TaskState | null>;
  lockWorkflow(workflowId: string): Promise<WorkflowRecord | null>;
  findWorkflowByKey(applicationId: string, clientWorkflowKey: string): Promise<WorkflowRecord | null>;
  findTaskIdByClientKey(workflowId: string, clientTaskKey: string): Promise<string | null>;
  findDedup(eventId: string): Promise<DedupRecord | null>;
  findAttempt(attemptId: string): Promise<AttemptRecord | null>;
  acl(taskId: string): Promise<AclEntry[]>;
  /** Dynamic registrations of the task since `since` (for the per-minute limit). */
  countRegistrationsSince(taskId: string, since: Date): Promise<number>;
  /** Claims an idempotency key; null when claimed now, else the stored answer (after any concurrent holder). */
  claimIdempotency(record: IdempotencyRecord): Promise<IdempotencyRecord | null>;
  write(write: FactWrite): Promise<void>;
}

export interface StatusStore {
  /** Runs `work` in one transaction; retried from the start on a deadlock or serialization failure. */
  transaction<T>(work: (tx: StatusTransaction) => Promise<T>): Promise<T>;
}

export interface StatusDefinition {
  applicationId: string;
  taskType: string;
  version: number;
  statuses: StatusDefinitionEntry[];
  createdAt: Date;
}

export interface OperationDefinition {
  applicationId: string;
  operationCode: string;
  version: number;
  displayName: string;
  taskTypePattern: string;
  producerPattern: string;
  allowedEventTypes: string[];
  dataSchemas: Record<string, { eventTypes: string[]; jsonSchema: Record<string, unknown> }>;
  failurePolicy: FailurePolicy;
  createdAt: Date;
}

export interface RegistryStore {
  insertStatusDefinition(
    definition: StatusDefinition,
  ): Promise<{ inserted: boolean; stored: StatusDefinition }>;
  getStatusDefinition(
    applicationId: string,
    taskType: string,
    version: number,
  ): Promise<StatusDefinition | null>;
  listStatusDefinitions(applicationId: string): Promise<StatusDefinition[]>;
  insertOperationDefinition(
    definition: OperationDefinition,
  ): Promise<{ inserted: boolean; stored: OperationDefinition }>;
  /** The newest enabled version, or a given one. */
  getOperationDefinition(
    applicationId: string,
    operationCode: string,
    version?: number,
  ): Promise<OperationDefinition | null>;
  listOperationDefinitions(applicationId: string): Promise<OperationDefinition[]>;
}

/** Claims carried by an execution credential (token or handle). */
export interface ExecutionClaims {
  applicationId: string;
  tenantId: string;
  workflowId: string;
  taskId: string;
  taskAttempt: number;
  stepId: string;
  stepAttempt: number;
  executionId: string;
  operationCode: string;
  producerId: string;
  allowedEventTypes: string[];
  expiresAt: Date;
}

export interface ExecutionCredentials {
  /** A signed token for these claims. */
  sign(claims: ExecutionClaims): Promise<string>;
  /** The claims of a valid, unexpired token; null otherwise. */
  verify(token: string, now: Date): Promise<ExecutionClaims | null>;
  /** A new compact handle (≥ 128 random bits) and the hash to store. */
  newHandle(): { handle: string; hash: Buffer };
  hashHandle(handle: string): Buffer;
}

export type LifecycleCounts = Partial<Record<LifecycleStatus, number>>;
