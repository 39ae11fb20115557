/**
 * Records shared by every context (the rows of the fact kernel). Glossary of the task model:
 * - task: the durable request "run workflow W on input I for application A"; it outlives its runs.
 * - execution: one run of a task with a frozen snapshot of the definition; a retry creates execution #2.
 * - step: one DAG node inside an execution; its state machine lives in the orchestration context.
 * - task version: rises by one with every recorded fact about the task (the event log's order).
 * - outbox event: a committed fact waiting to be published to the event bus.
 * - workflow: groups the tasks of one business request; every task belongs to one.
 * - step attempt: a step row is one attempt of one step; its `attemptId` is the execution instance that
 *   producers report for (`executionId` on the wire, bound into their credential).
 * - lifecycle / business status / phase / health: four separate fields; only lifecycle drives rules.
 */
import type {
  DynamicRegistrationPolicy,
  ExecutionStatus,
  FailurePolicy,
  Health,
  LifecycleStatus,
  Progress,
  StatusDefinitionEntry,
  StepDefinition,
  StepStatus,
  StructuredError,
  WaitingFor,
} from '@tdp/protocol';

export interface ExecutionSnapshot {
  definitionId: string;
  name: string;
  version: string;
  steps: StepDefinition[];
  /** The W3C trace context of the create (docs/observability.md): placements continue its trace. */
  traceparent?: string;
  /**
   * What decides this execution's next steps, frozen at create (a retry's execution keeps it): TDP in the
   * fact's own transaction (`native`, also when absent), or a Temporal workflow (`temporal`,
   * docs/temporal.md) that reads the execution and hands its decisions back.
   */
  engine?: OrchestrationEngine;
  /**
   * A task created with `singleton: { whenRunning: 'wait' }` (docs/scheduling.md): placement puts its
   * steps on workers only while it holds this singleton key of its application (a retry's execution too).
   */
  singleton?: { key: string };
  /** The task's fairness key within its application and its weight (docs/scheduling.md). */
  fairness?: { key: string; weight: number };
}

export type OrchestrationEngine = 'native' | 'temporal';

export interface TaskFailure extends StructuredError {
  failedStepId: string | null;
}

export interface TaskRecord {
  id: string;
  tenantId: string;
  applicationId: string;
  workflowId: string;
  clientTaskKey: string;
  workflowDefinitionId: string | null;
  workflowName: string | null;
  workflowVersion: string | null;
  name: string;
  externalRef: string | null;
  input: unknown;
  callbackUrl: string | null;
  priority: number;
  ownerId: string | null;
  taskType: string | null;
  productId: string | null;
  statusDefinitionVersion: number | null;
  lifecycleStatus: LifecycleStatus;
  businessStatus: string;
  health: Health;
  failure: TaskFailure | null;
  coordinatorSourceSeq: bigint;
  dynamicPolicy: DynamicRegistrationPolicy;
  dynamicStepCount: number;
  version: bigint;
  currentExecutionId: string;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  durationMs: number | null;
  eventsPrunedBefore: bigint;
  /** A child task (a step of kind `task`): the task and the step row that started it. */
  parentTaskId: string | null;
  parentStepId: string | null;
}

export interface ExecutionRecord {
  id: string;
  taskId: string;
  number: number;
  status: ExecutionStatus;
  progress: number;
  snapshot: ExecutionSnapshot;
  version: bigint;
  /** Sequence number of the last callback of this execution. */
  callbackSequence: number;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
  updatedAt: Date;
}

export interface StepRecord {
  id: string;
  taskId: string;
  executionId: string;
  key: string;
  attempt: number;
  clientStepKey: string;
  capability: string;
  capabilityVersion: string;
  operationCode: string;
  operationDefinitionVersion: number | null;
  expectedProducer: string | null;
  failurePolicy: FailurePolicy;
  dependsOn: string[];
  dynamic: boolean;
  parentAttemptId: string | null;
  depth: number;
  displayName: string | null;
  /** The execution instance of this attempt, once activated or registered. */
  attemptId: string | null;
  current: boolean;
  status: StepStatus;
  businessStatus: string | null;
  phaseCode: string | null;
  phaseLabel: string | null;
  progress: Progress | null;
  health: Health;
  sourceSeqs: Record<string, number>;
  heartbeatIntervalSeconds: number | null;
  heartbeatTimeoutSeconds: number | null;
  lastHeartbeatSeq: bigint;
  lastHeartbeatAt: Date | null;
  staleSince: Date | null;
  dataSchema: string | null;
  stateData: unknown;
  startedAt: Date | null;
  finishedAt: Date | null;
  durationMs: number | null;
  durationSource: string | null;
  error: StructuredError | null;
  /** Rerun from a step: this step did not run; it carries the output of this earlier execution's step. */
  reusedFromExecutionId: string | null;
  /** A running approval, signal, sleep, map or child-task step: what it waits for (null otherwise). */
  waitingFor: WaitingFor | null;
  version: bigint;
  createdAt: Date;
  updatedAt: Date;
}

export interface TaskEventRecord {
  id: string;
  taskId: string;
  workflowId: string;
  executionId: string;
  taskVersion: bigint;
  type: string;
  producer: string;
  payload: Record<string, unknown>;
  occurredAt: Date;
  receivedAt: Date;
  taskAttempt: number;
  stepKey: string | null;
  stepAttempt: number | null;
  attemptId: string | null;
  stepVersion: bigint | null;
  operationCode: string | null;
  sourceSeq: bigint | null;
  lifecycleStatus: LifecycleStatus;
  businessStatus: string;
  health: Health;
  phaseCode: string | null;
  dataSchema: string | null;
  errorCode: string | null;
  durationMs: number | null;
}

export interface OutboxRecord {
  id: string;
  tenantId: string;
  applicationId: string;
  aggregateId: string;
  eventType: string;
  payload: Record<string, unknown>;
  createdAt: Date;
}

/** A task as read back: the task, its current execution and that execution's steps. */
export interface TaskState {
  task: TaskRecord;
  execution: ExecutionRecord;
  steps: StepRecord[];
  /** The live ACL, when loaded with the task (the fact path needs it for projections). */
  acl?: AclEntry[];
}

export interface WorkflowRecord {
  id: string;
  tenantId: string;
  applicationId: string;
  clientWorkflowKey: string;
  ownerId: string | null;
  title: string;
  workflowType: string | null;
  lifecycleStatus: LifecycleStatus;
  version: bigint;
  taskCount: number;
  /** How many of its tasks are in each lifecycle status. */
  taskCounts: Partial<Record<LifecycleStatus, number>>;
  requestHash: string;
  createdAt: Date;
  updatedAt: Date;
}

/** A projection row for a realtime channel, committed with the fact it shows. */
export interface RealtimeRecord {
  id: string;
  tenantId: string;
  aggregateType: 'TASK' | 'WORKFLOW';
  aggregateId: string;
  aggregateVersion: bigint;
  channel: string;
  projection: 'USER_SUMMARY' | 'TASK_DETAIL' | 'WORKFLOW_SUMMARY' | 'USER_REMOVAL' | 'OPERATOR_SUMMARY';
  payload: Record<string, unknown>;
  createdAt: Date;
  /**
   * When the relay's loop may claim it (default: at once). Rows handed to the publisher right after
   * their commit wait a few seconds, so the loop only takes those the hand-off could not publish.
   */
  availableAt?: Date;
  /** The realtime_outbox row that stores it with the other records of its transaction (none: its own). */
  outboxId?: string;
}

export interface AclEntry {
  principalType: 'USER' | 'PROJECT' | 'ROLE';
  principalId: string;
  permission: 'VIEW' | 'OPERATE' | 'ADMIN';
}

export interface SchedulingRequestRecord {
  id: string;
  taskId: string;
  stepId: string;
  /** Whom the step's place in line is fair between (docs/scheduling.md). */
  tenantId: string;
  applicationId: string;
  /** The task's fairness key in its application ('' for none) and its weight. */
  fairnessKey: string;
  fairnessWeight: number;
  priority: number;
  availableAt: Date;
  createdAt: Date;
}

export interface WorkerCommandRecord {
  id: string;
  workerId: string;
  type: 'START_ATTEMPT' | 'CANCEL_ATTEMPT' | 'DRAIN';
  payload: Record<string, unknown>;
  createdAt: Date;
}

export interface TimerRecord {
  id: string;
  kind:
    | 'RETRY_DUE'
    | 'SCHEDULE_TO_START'
    | 'START_TO_CLOSE'
    | 'HEARTBEAT_TIMEOUT'
    | 'CANCEL_GRACE'
    /** A platform step (sleep, signal, approval, map, child task) begins. */
    | 'STEP_BEGIN'
    /** A sleep step's time has come. */
    | 'SLEEP_DUE'
    /** A signal step's wait ended without the signal. */
    | 'SIGNAL_TIMEOUT'
    /** A map item's retry back-off has passed. */
    | 'MAP_ITEM_RETRY_DUE'
    /** A map item's attempt reached the map step's startToCloseMs. */
    | 'MAP_ITEM_TIMEOUT'
    /** An approval step's time to decide ran out (its `onTimeout` applies). */
    | 'APPROVAL_TIMEOUT'
    /** A child task's execution ended (on its parent; see taskFamily.ts). */
    | 'CHILD_FINISHED'
    /** The parent step waiting for this child task was cancelled (on the child). */
    | 'CANCEL_CHILD';
  taskId: string;
  stepId: string | null;
  payload: Record<string, unknown>;
  availableAt: Date;
  createdAt: Date;
}

/** One decision on an approval step: immutable once written, one per decider and attempt. */
export interface StepDecisionRecord {
  id: string;
  taskId: string;
  stepId: string;
  stepKey: string;
  stepAttempt: number;
  /** `user:<userId>`, or `operator`. */
  decidedBy: string;
  decision: 'APPROVE' | 'REJECT';
  comment: string | null;
  data: unknown;
  /** The operator's reason (operator decisions only). */
  reason: string | null;
  idempotencyKey: string;
  requestHash: string;
  /** What the step became through this decision. */
  outcome: 'PENDING' | 'APPROVED' | 'REJECTED';
  taskVersion: bigint;
  decidedAt: Date;
}

export interface CallbackRecord {
  id: string;
  applicationId: string;
  taskId: string;
  executionId: string;
  sequence: number;
  eventId: string;
  eventType: string;
  url: string;
  payload: Record<string, unknown>;
  createdAt: Date;
}

export interface TimelineRecord {
  id: string;
  taskId: string;
  executionId: string;
  kind: string;
  message: string;
  data: Record<string, unknown>;
  at: Date;
}

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
  /** The item of a map step this attempt runs (null: the step itself). */
  itemIndex: number | null;
}

export type MapItemStatus = 'PENDING' | 'RUNNING' | 'WAITING_RETRY' | 'SUCCEEDED' | 'FAILED' | 'CANCELLED';

/**
 * One item of a map step (kind `map`): not a step row, so that a 10,000-item map costs no read or write
 * of its other items per fact. `attempt` counts the attempts started; `attemptId` is the open or last one.
 */
export interface MapItemRecord {
  stepId: string;
  index: number;
  status: MapItemStatus;
  attempt: number;
  attemptId: string | null;
  output: unknown;
  error: StructuredError | null;
  updatedAt: Date;
}

export interface DedupRecord {
  eventId: string;
  taskId: string;
  payloadHash: string;
  result: Record<string, unknown>;
  createdAt: Date;
}

/** The remembered answer to one write, keyed by who asked, what they asked for and their key. */
/** A signal sent to a task; kept until a signal step of that name takes it. */
export interface SignalRecord {
  id: string;
  taskId: string;
  name: string;
  payload: unknown;
  createdAt: Date;
}

export interface IdempotencyRecord {
  principal: string;
  operation: string;
  key: string;
  requestHash: string;
  responseStatus: number;
  responseBody: unknown;
  createdAt: Date;
}

export interface StatusDefinition {
  applicationId: string;
  taskType: string;
  version: number;
  statuses: StatusDefinitionEntry[];
  createdAt: Date;
}

/**
 * Who did an operator action: the operator (null: the bootstrap admin token), by the name they had
 * then, and the public id of the session or personal token they used.
 */
export interface OperatorActor {
  operatorId: string | null;
  name: string;
  credentialId: string | null;
}

/** One operator action, audited (`operator_audit`): who did what to which subject, and why. */
export interface OperatorAuditRecord {
  id: string;
  action: string;
  subjectId: string;
  actor: OperatorActor;
  reason: string;
  details: Record<string, unknown>;
  /** The tenant and task the action was about, when it was about one. */
  tenantId?: string | null;
  taskId?: string | null;
  /** The subject as it was, and as the action left it (when the action changed a record). */
  before?: unknown;
  after?: unknown;
  createdAt: Date;
}
