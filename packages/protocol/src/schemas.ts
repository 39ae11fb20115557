/**
 * Wire contracts of the public API. These TypeBox schemas validate requests at the HTTP edge, produce the
 * OpenAPI document and give the TypeScript types, so the three never disagree.
 *
 * Glossary
 * - workflow definition: a named, versioned DAG of steps (capability steps and the kinds in
 *   stepKinds.ts); immutable once published.
 * - task: a durable request from an application to run one workflow on one input.
 * - execution: one run of a task, holding the frozen definition snapshot with merged step constraints.
 * - step: one node of the DAG inside one execution.
 * - version: a per-aggregate counter that only rises; sent as a decimal string.
 */
import { type Static, Type } from 'typebox';
import {
  ConcurrencyKey,
  ConcurrencyKeys,
  CreateTaskDebounce,
  CreateTaskFairness,
  CreateTaskSingleton,
  DebounceOutcome,
  RateLimit,
  RateLimits,
  SingletonOutcome,
} from './fairShare.ts';
import { StepKindOptions, WaitingFor } from './stepKinds.ts';

const Strict = { additionalProperties: false } as const;

export const Labels = Type.Record(
  Type.String({ minLength: 1, maxLength: 63 }),
  Type.String({ maxLength: 63 }),
);

export const MinimumResources = Type.Object(
  {
    cpuMillis: Type.Optional(Type.Integer({ minimum: 0 })),
    memoryMb: Type.Optional(Type.Integer({ minimum: 0 })),
    gpus: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  Strict,
);

/** Where a step may run; also the shape of a task's per-step constraint override. */
export const Affinity = Type.Object(
  {
    nodeId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    group: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    requiredLabels: Type.Optional(Labels),
    preferredLabels: Type.Optional(Labels),
    minimumResources: Type.Optional(MinimumResources),
  },
  Strict,
);
export type Affinity = Static<typeof Affinity>;

export const StepTimeouts = Type.Object(
  {
    scheduleToStartMs: Type.Optional(Type.Integer({ minimum: 1 })),
    startToCloseMs: Type.Optional(Type.Integer({ minimum: 1 })),
    heartbeatMs: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  Strict,
);

export const RetryPolicy = Type.Object(
  {
    maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    initialBackoffMs: Type.Optional(Type.Integer({ minimum: 0 })),
    maxBackoffMs: Type.Optional(Type.Integer({ minimum: 0 })),
    multiplier: Type.Optional(Type.Number({ minimum: 1, maximum: 10 })),
    nonRetryableErrorCodes: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 100 })),
  },
  Strict,
);

export const FailurePolicy = Type.Union([
  Type.Literal('FAIL_TASK'),
  Type.Literal('RETRY_THEN_FAIL_TASK'),
  Type.Literal('CONTINUE_WITH_WARNING'),
]);
export type FailurePolicy = Static<typeof FailurePolicy>;

const StepKey = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z][A-Za-z0-9_-]*$' });

export const StepDefinitionInput = Type.Object(
  {
    key: StepKey,
    /** Required for a capability step (the default kind); a map names its capability in `map`. */
    capability: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    capabilityVersion: Type.Optional(Type.String({ minLength: 1, maxLength: 50 })),
    ...StepKindOptions,
    dependsOn: Type.Optional(Type.Array(Type.String(), { maxItems: 100 })),
    /**
     * Input field → value. A string starting with `$.input` reads the task input, `$.steps.<key>.output`
     * reads an upstream step's output; anything else is a literal.
     */
    inputMapping: Type.Optional(Type.Record(Type.String({ minLength: 1 }), Type.Unknown())),
    affinity: Type.Optional(Affinity),
    timeouts: Type.Optional(StepTimeouts),
    retry: Type.Optional(RetryPolicy),
    failurePolicy: Type.Optional(FailurePolicy),
    /** A delayed step: once ready, its first attempt waits this long before it is placed (up to 30 days). */
    startDelayMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_592_000_000 })),
    /** Keys this step holds while it runs, beside the workflow's own (a capability step). */
    concurrency: Type.Optional(ConcurrencyKeys),
    /** Rate limits this step's starts take a token of, beside the workflow's own (a capability step). */
    rateLimits: Type.Optional(RateLimits),
  },
  Strict,
);

export const WorkflowVersion = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$',
});
export const WorkflowName = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$',
});

export const PublishWorkflowDefinitionRequest = Type.Object(
  {
    name: WorkflowName,
    version: WorkflowVersion,
    description: Type.Optional(Type.String({ maxLength: 2000 })),
    inputSchema: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    steps: Type.Array(StepDefinitionInput, { minItems: 1, maxItems: 200 }),
    /** The schedule-to-start limit of every capability step that sets none of its own. */
    scheduleToStartMs: Type.Optional(Type.Integer({ minimum: 1 })),
    /** Keys every capability step of the workflow holds while it runs (docs/scheduling.md). */
    concurrency: Type.Optional(ConcurrencyKeys),
    /** Rate limits every capability step of the workflow starts under (docs/scheduling.md). */
    rateLimits: Type.Optional(RateLimits),
  },
  Strict,
);
export type PublishWorkflowDefinitionRequest = Static<typeof PublishWorkflowDefinitionRequest>;

export const StepDefinition = Type.Object({
  key: Type.String(),
  capability: Type.String(),
  capabilityVersion: Type.String(),
  dependsOn: Type.Array(Type.String()),
  inputMapping: Type.Record(Type.String(), Type.Unknown()),
  affinity: Affinity,
  timeouts: StepTimeouts,
  retry: Type.Object({
    maxAttempts: Type.Integer(),
    initialBackoffMs: Type.Integer(),
    maxBackoffMs: Type.Integer(),
    multiplier: Type.Number(),
    nonRetryableErrorCodes: Type.Array(Type.String()),
  }),
  failurePolicy: FailurePolicy,
  /** Absent in definitions published before delayed steps existed. */
  startDelayMs: Type.Optional(Type.Integer()),
  /** The keys the step holds while it runs: the workflow's, then its own (absent: none). */
  concurrency: Type.Optional(Type.Array(ConcurrencyKey)),
  /** The rate limits its starts take a token of: the workflow's, then its own (absent: none). */
  rateLimits: Type.Optional(Type.Array(RateLimit)),
  /** `kind` is absent in definitions published before step kinds existed (capability steps). */
  ...StepKindOptions,
});
export type StepDefinition = Static<typeof StepDefinition>;

export const WorkflowDefinition = Type.Object({
  id: Type.String(),
  name: Type.String(),
  version: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  inputSchema: Type.Record(Type.String(), Type.Unknown()),
  steps: Type.Array(StepDefinition),
  publishedAt: Type.String({ format: 'date-time' }),
});
export type WorkflowDefinition = Static<typeof WorkflowDefinition>;

/** A publish still succeeds with a warning: e.g. a step no registered worker can take (a likely typo). */
/**
 * Something a publish accepted but that will not work as written: `CAPABILITY_NOT_OFFERED` (no worker
 * offers the step's capability; with `capability`, `capabilityVersion` and the nearest `suggestions`) or
 * `INPUT_NOT_DECLARED` (a required `$.input…` mapping in a workflow without an inputSchema; with `path`).
 */
export const PublishWarning = Type.Object({
  code: Type.String(),
  stepKey: Type.String(),
  capability: Type.Optional(Type.String()),
  capabilityVersion: Type.Optional(Type.String()),
  /** The nearest offered `name@version`s, closest first. */
  suggestions: Type.Optional(Type.Array(Type.String())),
  /** The JSON Pointer of the mapping a warning is about. */
  path: Type.Optional(Type.String()),
  message: Type.String(),
});
export type PublishWarning = Static<typeof PublishWarning>;

export const PublishWorkflowDefinitionResponse = Type.Object({
  ...WorkflowDefinition.properties,
  warnings: Type.Array(PublishWarning),
});
export type PublishWorkflowDefinitionResponse = Static<typeof PublishWorkflowDefinitionResponse>;

export const StepConstraints = Type.Record(Type.String(), Affinity);
export type StepConstraints = Static<typeof StepConstraints>;

export const CreateTaskRequest = Type.Object(
  {
    workflowName: WorkflowName,
    workflowVersion: WorkflowVersion,
    name: Type.String({ minLength: 1, maxLength: 200 }),
    externalRef: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    input: Type.Optional(Type.Unknown()),
    callbackUrl: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
    priority: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
    stepConstraints: Type.Optional(StepConstraints),
    ownerId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    /** An existing workflow of yours to add the task to; by default each task gets a workflow of its own. */
    workflowId: Type.Optional(Type.String({ format: 'uuid' })),
    /**
     * How long each capability step may wait for a worker before it fails (SCHEDULE_TO_START_TIMEOUT),
     * overriding the workflow's limits for this task.
     */
    scheduleToStartMs: Type.Optional(Type.Integer({ minimum: 1 })),
    debounce: Type.Optional(CreateTaskDebounce),
    singleton: Type.Optional(CreateTaskSingleton),
    fairness: Type.Optional(CreateTaskFairness),
  },
  Strict,
);
export type CreateTaskRequest = Static<typeof CreateTaskRequest>;

export const ExecutionStatus = Type.Union([
  Type.Literal('CREATED'),
  Type.Literal('QUEUED'),
  Type.Literal('RUNNING'),
  Type.Literal('CANCELLING'),
  Type.Literal('SUCCEEDED'),
  Type.Literal('FAILED'),
  Type.Literal('TIMED_OUT'),
  Type.Literal('CANCELLED'),
]);
export type ExecutionStatus = Static<typeof ExecutionStatus>;

export const StepStatus = Type.Union([
  Type.Literal('WAITING'),
  Type.Literal('READY'),
  Type.Literal('QUEUED'),
  Type.Literal('RUNNING'),
  Type.Literal('SUCCEEDED'),
  Type.Literal('FAILED'),
  Type.Literal('SKIPPED'),
  Type.Literal('CANCELLED'),
]);
export type StepStatus = Static<typeof StepStatus>;

export const LifecycleStatus = Type.Union([
  Type.Literal('PENDING'),
  Type.Literal('RUNNING'),
  Type.Literal('SUCCEEDED'),
  Type.Literal('FAILED'),
  Type.Literal('CANCELLED'),
  Type.Literal('TIMED_OUT'),
]);
export type LifecycleStatus = Static<typeof LifecycleStatus>;

const Timestamp = Type.String({ format: 'date-time' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

export const Health = Type.Union([Type.Literal('HEALTHY'), Type.Literal('DEGRADED'), Type.Literal('STALE')]);
export type Health = Static<typeof Health>;

/** A structured error: `code` drives behaviour, `userMessage` is a short sentence for people (messages.ts). */
export const StructuredError = Type.Object(
  {
    category: Type.String({ minLength: 1, maxLength: 64 }),
    code: Type.String({ minLength: 1, maxLength: 128 }),
    retryable: Type.Boolean(),
    userMessage: Type.Optional(Type.String({ maxLength: 2000 })),
    /** What went wrong technically, for developers and operators; stored, never shown to people. */
    detail: Type.Optional(Type.String({ maxLength: 2000 })),
    /** Server-side diagnostics reference; stored, never sent to a browser. */
    diagnosticsRef: Type.Optional(Type.String({ maxLength: 255 })),
  },
  { additionalProperties: false },
);
export type StructuredError = Static<typeof StructuredError>;

export const PublicError = Type.Object({
  category: Type.String(),
  code: Type.String(),
  retryable: Type.Boolean(),
  userMessage: Type.Union([Type.String(), Type.Null()]),
});
export type PublicError = Static<typeof PublicError>;

export const Progress = Type.Object(
  {
    current: Type.Optional(Type.Number({ minimum: 0 })),
    total: Type.Optional(Type.Number({ minimum: 0 })),
    unit: Type.Optional(Type.String({ maxLength: 32 })),
    percent: Type.Optional(Type.Number({ minimum: 0, maximum: 100 })),
  },
  { additionalProperties: false },
);
export type Progress = Static<typeof Progress>;

export const StepView = Type.Object({
  id: Type.String(),
  key: Type.String(),
  attempt: Type.Integer(),
  attemptId: Type.Union([Type.String(), Type.Null()]),
  /** @deprecated use attemptId */
  executionId: Type.Union([Type.String(), Type.Null()], { description: 'Deprecated: use attemptId' }),
  capability: Type.String(),
  capabilityVersion: Type.String(),
  operationCode: Type.String(),
  dependsOn: Type.Array(Type.String()),
  dynamic: Type.Boolean(),
  status: StepStatus,
  lifecycleStatus: LifecycleStatus,
  businessStatus: Type.Union([Type.String(), Type.Null()]),
  phaseCode: Type.Union([Type.String(), Type.Null()]),
  phaseLabel: Type.Union([Type.String(), Type.Null()]),
  progress: Type.Union([Progress, Type.Null()]),
  health: Health,
  version: Type.String(),
  dataSchema: Type.Union([Type.String(), Type.Null()]),
  data: Type.Unknown(),
  error: Type.Union([PublicError, Type.Null()]),
  startedAt: Type.Union([Type.String(), Type.Null()]),
  finishedAt: Type.Union([Type.String(), Type.Null()]),
  durationMs: Type.Union([Type.Integer(), Type.Null()]),
  durationSource: Type.Union([Type.String(), Type.Null()]),
  lastHeartbeatAt: Type.Union([Type.String(), Type.Null()]),
  /** Rerun from a step: the step did not run in this execution; its output is that earlier execution's. */
  reusedFromExecutionId: Type.Union([Type.String(), Type.Null()]),
  /** A running approval, signal, sleep, map or child-task step: what it waits for. */
  waitingFor: Type.Union([WaitingFor, Type.Null()]),
  /** Why a ready step has no worker yet ("no worker offers image.watermark@2"); on GET /v1/tasks/{id}. */
  unschedulableReasons: Type.Optional(Type.Array(Type.String())),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type StepView = Static<typeof StepView>;

export const ExecutionView = Type.Object({
  id: Type.String(),
  number: Type.Integer(),
  status: ExecutionStatus,
  progress: Type.Integer(),
  version: Type.String(),
  createdAt: Timestamp,
  startedAt: NullableTimestamp,
  completedAt: NullableTimestamp,
  steps: Type.Array(StepView),
  /**
   * What decides the next steps, frozen when the execution was made: TDP itself (`native`) or a Temporal
   * workflow (`temporal`), whose workflow id is the execution id.
   */
  orchestration: Type.Object({
    engine: Type.Union([Type.Literal('native'), Type.Literal('temporal')]),
    workflowId: Type.Union([Type.String(), Type.Null()]),
  }),
});
export type ExecutionView = Static<typeof ExecutionView>;

export const TaskView = Type.Object({
  id: Type.String(),
  workflowId: Type.String(),
  applicationId: Type.String(),
  workflowName: Type.Union([Type.String(), Type.Null()]),
  workflowVersion: Type.Union([Type.String(), Type.Null()]),
  clientTaskKey: Type.String(),
  name: Type.String(),
  externalRef: Type.Union([Type.String(), Type.Null()]),
  input: Type.Unknown(),
  callbackUrl: Type.Union([Type.String(), Type.Null()]),
  priority: Type.Integer(),
  ownerId: Type.Union([Type.String(), Type.Null()]),
  taskType: Type.Union([Type.String(), Type.Null()]),
  productId: Type.Union([Type.String(), Type.Null()]),
  statusDefinitionVersion: Type.Union([Type.Integer(), Type.Null()]),
  lifecycleStatus: LifecycleStatus,
  businessStatus: Type.String(),
  health: Health,
  failure: Type.Union([
    Type.Intersect([PublicError, Type.Object({ failedStepId: Type.Union([Type.String(), Type.Null()]) })]),
    Type.Null(),
  ]),
  version: Type.String(),
  currentExecutionId: Type.String(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  startedAt: Type.Union([Type.String(), Type.Null()]),
  finishedAt: Type.Union([Type.String(), Type.Null()]),
  /** Derived: startedAt − createdAt. */
  queueDurationMs: Type.Union([Type.Integer(), Type.Null()]),
  /** The coordinator's reported duration of the whole run, when given. */
  runDurationMs: Type.Union([Type.Integer(), Type.Null()]),
  /** Derived: finishedAt − createdAt. */
  totalDurationMs: Type.Union([Type.Integer(), Type.Null()]),
  /** A child task (started by a step of kind `task`): the parent task's id; null otherwise. */
  parentTaskId: Type.Union([Type.String(), Type.Null()]),
});
export type TaskView = Static<typeof TaskView>;

export const TaskWithExecution = Type.Object({ task: TaskView, execution: ExecutionView });
export type TaskWithExecution = Static<typeof TaskWithExecution>;

/**
 * The answer to `POST /v1/tasks`. `task` and `execution` are the creation's own result, the same on every
 * replay. A replay (200, `idempotent-replayed: true`) adds `current`: the task as it stands now (null once
 * the retention sweep archived it), so a retry long after never reads a finished task as PENDING.
 */
export const TaskCreated = Type.Object({
  task: TaskView,
  execution: ExecutionView,
  debounce: Type.Optional(DebounceOutcome),
  singleton: Type.Optional(SingletonOutcome),
  current: Type.Optional(Type.Union([TaskWithExecution, Type.Null()])),
});
export type TaskCreated = Static<typeof TaskCreated>;

export const TaskPage = Type.Object({
  items: Type.Array(TaskWithExecution),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
});
export type TaskPage = Static<typeof TaskPage>;
