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
  CallbackRecord,
  SchedulingRequestRecord,
  TimelineRecord,
  TimerRecord,
  WorkerCommandRecord,
} from '../scheduling/model.ts';
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
  handleSealed: string;
  /** The worker session holding the lease (platform steps), and the lease's version. */
  workerId: string | null;
  leaseVersion: number;
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
  /** Claimed in the same round; a key already taken fails the transaction (unique violation). */
  idempotency?: IdempotencyRecord;
  newWorkflow?: WorkflowRecord;
  newTask?: { task: TaskRecord; execution: ExecutionRecord };
  workflow?: WorkflowRecord;
  task?: TaskRecord;
  execution?: ExecutionRecord;
  /** A further run of an existing task (POST /v1/tasks/{id}:retry). */
  newExecution?: ExecutionRecord;
  newSteps?: StepRecord[];
  steps?: StepRecord[];
  attempts?: AttemptRecord[];
  revokeAttemptIds?: string[];
  events: TaskEventRecord[];
  dedup?: DedupRecord[];
  outbox: OutboxRecord[];
  realtime: RealtimeRecord[];
  schedulingRequests?: SchedulingRequestRecord[];
  /** Scheduling requests that are done: dispatched, or their step no longer needs a worker. */
  closeSchedulingRequests?: { stepIds: string[]; status: 'DISPATCHED' | 'CANCELED' };
  workerCommands?: WorkerCommandRecord[];
  /** Commands their worker acknowledged along with its events (ids of other workers change nothing). */
  commandAcks?: { workerId: string; commandIds: string[]; at: Date };
  timers?: TimerRecord[];
  callbacks?: CallbackRecord[];
  timeline?: TimelineRecord[];
}

export interface ClaimedSchedulingRequest {
  id: string;
  taskId: string;
  stepId: string;
}

export interface StatusTransaction {
  /** Due PENDING scheduling requests, by priority then age, locked (SKIP LOCKED) until commit. */
  claimSchedulingRequests(now: Date, limit: number): Promise<ClaimedSchedulingRequest[]>;
  /** Puts claimed requests back with why no worker could take them, to be tried again at `availableAt`. */
  deferSchedulingRequests(requests: { id: string; reasons: string[] }[], availableAt: Date): Promise<void>;
  /** Transaction-scoped advisory locks on keys (e.g. step + attempt), taken in key order. */
  advisoryLocks(keys: string[]): Promise<void>;
  /** Locks the task unless another transaction holds it (then null: try again later). */
  lockTaskIfFree(taskId: string): Promise<TaskState | null>;
  /** The task with its current execution and that execution's step rows, locked until commit. */
  lockTask(taskId: string): Promise<TaskState | null>;
  /**
   * Several tasks as `lockTask` reads one, locked in id order (missing ids are left out), and with
   * `workflows` their workflows too, locked after them in id order.
   */
  lockTasks(
    taskIds: string[],
    options?: { workflows?: boolean },
  ): Promise<{ tasks: TaskState[]; workflows: WorkflowRecord[] }>;
  lockWorkflow(workflowId: string): Promise<WorkflowRecord | null>;
  /** Locks the workflows in id order. */
  lockWorkflows(workflowIds: string[]): Promise<WorkflowRecord[]>;
  findWorkflowByKey(applicationId: string, clientWorkflowKey: string): Promise<WorkflowRecord | null>;
  findTaskIdByClientKey(workflowId: string, clientTaskKey: string): Promise<string | null>;
  findDedup(eventId: string): Promise<DedupRecord | null>;
  findDedups(eventIds: string[]): Promise<DedupRecord[]>;
  findAttempt(attemptId: string): Promise<AttemptRecord | null>;
  findAttemptByHandle(handleHash: Buffer): Promise<AttemptRecord | null>;
  findAttemptsByHandle(handleHashes: Buffer[]): Promise<AttemptRecord[]>;
  acl(taskId: string): Promise<AclEntry[]>;
  /** Dynamic registrations of the task since `since` (for the per-minute limit). */
  countRegistrationsSince(taskId: string, since: Date): Promise<number>;
  findIdempotency(principal: string, operation: string, key: string): Promise<IdempotencyRecord | null>;
  /** Sends every statement at once (pipelined); false `idempotencyClaimed` means the key was taken. */
  write(write: FactWrite): Promise<void>;
  /** Several facts' writes in one round: each row once, in its last state (see `mergeWrites`). */
  writeAll(writes: FactWrite[]): Promise<void>;
  /** Writes sent together with the COMMIT (no round trip of their own); their failure fails the commit. */
  writeAtCommit(writes: FactWrite[]): void;
}

/** One heartbeat resolved to its execution instance. */
export interface HeartbeatUpdate {
  attemptId: string;
  heartbeatSeq: number;
}

/** Why a heartbeat did not renew the lease, as the database sees the step attempt. */
export interface HeartbeatProbe {
  attemptId: string;
  taskId: string;
  status: string;
  health: string;
  current: boolean;
  lastHeartbeatSeq: bigint;
  executionIsCurrent: boolean;
}

export interface StatusReads {
  events(
    taskId: string,
    afterTaskVersion: bigint,
    limit: number,
  ): Promise<import('../tasks/model.ts').TaskEventRecord[]>;
  /** Tasks a user may see (owner or live ACL), most recently updated first. */
  visibleTasks(
    tenantId: string,
    viewer: Viewer,
    page: { limit: number; before?: { updatedAt: Date; id: string } },
  ): Promise<TaskState[]>;
  canView(taskId: string, viewer: Viewer): Promise<boolean>;
  tasksOf(workflowId: string): Promise<TaskState[]>;
  workflow(workflowId: string): Promise<WorkflowRecord | null>;
  task(taskId: string): Promise<TaskState | null>;
  /** Drops events below `beforeVersion` (retention); reads before it answer EVENTS_PRUNED. */
  pruneEvents(taskId: string, beforeVersion: bigint): Promise<void>;
  /** Grants access and writes `announce` (the summary for the principal's channel) in one transaction. */
  grantAcl(taskId: string, entry: AclEntry, at: Date, announce: RealtimeRecord[]): Promise<void>;
  /** Revokes access and writes `announce` (the removal tombstone) in one transaction; false if none. */
  revokeAcl(
    taskId: string,
    principalType: string,
    principalId: string,
    at: Date,
    announce: RealtimeRecord[],
  ): Promise<boolean>;
  attachExternalRef(
    applicationId: string,
    refType: string,
    refValue: string,
    taskId: string,
    at: Date,
  ): Promise<string>;
  findExternalRef(applicationId: string, refType: string, refValue: string): Promise<string | null>;
}

/** Someone reading on behalf of an end user: the user, and the projects and roles they act in. */
export interface Viewer {
  userId: string;
  projects: string[];
  roles: string[];
}

export interface StatusStore {
  /**
   * The light heartbeat path: renews the lease of every RUNNING, HEALTHY, current attempt whose sequence
   * rises, in one statement; no version, no event, no message. Returns the attempts it renewed.
   */
  renewLeases(updates: HeartbeatUpdate[], now: Date): Promise<Set<string>>;
  probeAttempts(attemptIds: string[]): Promise<HeartbeatProbe[]>;
  attemptsByHandle(hashes: Buffer[]): Promise<AttemptRecord[]>;
  attemptsById(ids: string[]): Promise<AttemptRecord[]>;
  /** Tasks with running, healthy steps past their heartbeat deadline (candidates, not locked). */
  overdueTasks(now: Date, limit: number): Promise<string[]>;
  /**
   * Runs `work` in one transaction; retried from the start on a deadlock or serialization failure.
   * With `writeOnly`, `work` may not read: everything it writes (at commit) is applied atomically in
   * one round trip.
   */
  transaction<T>(work: (tx: StatusTransaction) => Promise<T>, options?: { writeOnly?: boolean }): Promise<T>;
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

/** Short-lived tokens an application's backend obtains for one of its users (reads as that user). */
export interface UserPrincipal {
  kind: 'user';
  applicationId: string;
  tenantId: string;
  viewer: Viewer;
}

export interface UserTokens {
  sign(principal: UserPrincipal, expiresAt: Date): Promise<string>;
  verify(token: string, now: Date): Promise<UserPrincipal | null>;
}
