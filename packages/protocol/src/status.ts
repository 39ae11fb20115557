/**
 * Wire contracts of the status service (docs/status.md).
 *
 * Glossary
 * - workflow: a group of independent tasks from one business request; its own version axis.
 * - coordinator: the application (API key) that creates tasks, activates steps and ends tasks.
 * - producer: a service that reports facts about one step attempt, with an execution credential.
 * - attempt: one run of one step (`attemptId`; `executionId` is its deprecated name here); bound into
 *   the credential. A step is named by its key (`stepKey`; `stepId` deprecated) from other objects.
 * - execution token / handle: a signed token, or a short random handle plus the application key.
 * - sourceSeq: the producer's own counter per task + step + attempt + producer.
 * - taskVersion / stepVersion / workflowVersion: counters the server assigns, one per aggregate.
 */
import { type Static, Type } from 'typebox';
import {
  FailurePolicy,
  Health,
  LifecycleStatus,
  Progress,
  StructuredError,
  TaskWithExecution,
} from './schemas.ts';

const Strict = { additionalProperties: false } as const;
const Key = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]*$' });
const Code = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9][A-Za-z0-9._*-]*$' });
const Uuid = Type.String({ format: 'uuid' });
const Version = Type.String({ pattern: '^[0-9]+$' });

export const ReportableEventType = Type.Union([
  Type.Literal('STEP_STARTED'),
  Type.Literal('STEP_PROGRESS'),
  Type.Literal('STEP_COMPLETED'),
  Type.Literal('STEP_FAILED'),
  Type.Literal('TASK_COMPLETED'),
  Type.Literal('TASK_FAILED'),
]);
export type ReportableEventType = Static<typeof ReportableEventType>;

export const KnownStep = Type.Object(
  {
    stepId: Key,
    operationCode: Code,
    expectedProducer: Type.String({ minLength: 1, maxLength: 128 }),
    dependsOn: Type.Optional(Type.Array(Key, { maxItems: 100 })),
    failurePolicy: Type.Optional(FailurePolicy),
    displayName: Type.Optional(Type.String({ maxLength: 200 })),
    heartbeatIntervalSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600 })),
    heartbeatTimeoutSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400 })),
  },
  Strict,
);
export type KnownStep = Static<typeof KnownStep>;

export const DynamicRegistrationPolicy = Type.Object(
  {
    allowedParentOperations: Type.Optional(Type.Array(Code, { maxItems: 50 })),
    allowedChildOperations: Type.Optional(Type.Array(Code, { maxItems: 50 })),
    maxDynamicSteps: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000 })),
    maxDepth: Type.Optional(Type.Integer({ minimum: 1, maximum: 32 })),
    maxParallelExecutions: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000 })),
    registrationsPerMinute: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
  },
  Strict,
);
export type DynamicRegistrationPolicy = Static<typeof DynamicRegistrationPolicy>;

export const NewStatusTask = Type.Object(
  {
    clientTaskKey: Key,
    title: Type.String({ minLength: 1, maxLength: 255 }),
    ownerId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    taskType: Type.Optional(Type.Union([Code, Type.Null()])),
    productId: Type.Optional(
      Type.Union([Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._-]+$' }), Type.Null()]),
    ),
    statusDefinitionVersion: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1, maximum: 2_147_483_647 }), Type.Null()]),
    ),
    knownSteps: Type.Optional(Type.Array(KnownStep, { maxItems: 200 })),
    dynamicRegistrationPolicy: Type.Optional(DynamicRegistrationPolicy),
  },
  Strict,
);
export type NewStatusTask = Static<typeof NewStatusTask>;

export const CreateWorkflowRequest = Type.Object(
  {
    clientWorkflowKey: Key,
    ownerId: Type.String({ minLength: 1, maxLength: 200 }),
    title: Type.String({ minLength: 1, maxLength: 255 }),
    workflowType: Type.Optional(Type.Union([Code, Type.Null()])),
    initialTasks: Type.Optional(Type.Array(NewStatusTask, { maxItems: 100 })),
  },
  Strict,
);
export type CreateWorkflowRequest = Static<typeof CreateWorkflowRequest>;

export const CreatedTaskRef = Type.Object({
  taskId: Type.String(),
  clientTaskKey: Type.String(),
  taskVersion: Version,
});
export const WorkflowCreated = Type.Object({
  workflowId: Type.String(),
  workflowVersion: Version,
  created: Type.Boolean(),
  tasks: Type.Array(CreatedTaskRef),
});
export type WorkflowCreated = Static<typeof WorkflowCreated>;

export const ExecutionContext = Type.Object({
  workflowId: Type.String(),
  taskId: Type.String(),
  taskAttempt: Type.Integer(),
  stepKey: Type.String(),
  /** @deprecated use stepKey */
  stepId: Type.String({ description: 'Deprecated: use stepKey' }),
  stepAttempt: Type.Integer(),
  attemptId: Type.String(),
  /** @deprecated use attemptId */
  executionId: Type.String({ description: 'Deprecated: use attemptId' }),
  operationCode: Type.String(),
  operationDefinitionVersion: Type.Union([Type.Integer(), Type.Null()]),
  producerId: Type.String(),
  allowedEventTypes: Type.Array(Type.String()),
  executionToken: Type.String(),
  executionHandle: Type.String(),
  expiresAt: Type.String(),
  heartbeatIntervalSeconds: Type.Integer(),
  heartbeatTimeoutSeconds: Type.Integer(),
  taskVersion: Version,
  created: Type.Boolean(),
});
export type ExecutionContext = Static<typeof ExecutionContext>;

export const RegisterExecutionRequest = Type.Object(
  {
    clientStepKey: Key,
    parentExecutionId: Type.Optional(Uuid),
    operationCode: Code,
    producerId: Type.String({ minLength: 1, maxLength: 128 }),
    attempt: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    displayName: Type.Optional(Type.String({ maxLength: 200 })),
    failurePolicy: Type.Optional(FailurePolicy),
    heartbeatIntervalSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600 })),
    heartbeatTimeoutSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400 })),
  },
  Strict,
);
export type RegisterExecutionRequest = Static<typeof RegisterExecutionRequest>;

export const EventData = Type.Object(
  { schema: Type.String({ minLength: 1, maxLength: 128 }), value: Type.Unknown() },
  Strict,
);

const EventBodyFields = {
  eventId: Uuid,
  eventType: ReportableEventType,
  sourceSeq: Type.Integer({ minimum: 1 }),
  businessStatus: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  phaseCode: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._-]+$' })),
  phaseLabel: Type.Optional(Type.String({ maxLength: 200 })),
  progress: Type.Optional(Progress),
  message: Type.Optional(Type.String({ maxLength: 500 })),
  occurredAt: Type.Optional(Type.String({ format: 'date-time' })),
  durationMs: Type.Optional(Type.Integer({ minimum: 0 })),
  durationSource: Type.Optional(Type.Union([Type.Literal('MONOTONIC'), Type.Literal('WALL_CLOCK_ESTIMATE')])),
  data: Type.Optional(EventData),
  error: Type.Optional(StructuredError),
  failedStepId: Type.Optional(Key),
};

/** The self-describing form: every identity field is restated and must match the credential. */
export const FullTaskEvent = Type.Object(
  {
    ...EventBodyFields,
    workflowId: Type.Optional(Uuid),
    taskId: Uuid,
    taskType: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    taskAttempt: Type.Optional(Type.Integer({ minimum: 1 })),
    stepId: Type.Optional(Key),
    operationCode: Type.Optional(Code),
    stepAttempt: Type.Optional(Type.Integer({ minimum: 1 })),
    executionId: Type.Optional(Uuid),
    producerId: Type.String({ minLength: 1, maxLength: 128 }),
  },
  Strict,
);
export type FullTaskEvent = Static<typeof FullTaskEvent>;

/** The compact form: the handle stands for every identity field (used with the application key). */
export const CompactTaskEvent = Type.Object(
  { ...EventBodyFields, executionHandle: Type.String({ minLength: 10, maxLength: 100 }) },
  Strict,
);
export type CompactTaskEvent = Static<typeof CompactTaskEvent>;

export const TaskEventRequest = Type.Union([CompactTaskEvent, FullTaskEvent]);
export type TaskEventRequest = Static<typeof TaskEventRequest>;

export const EventResult = Type.Object({
  accepted: Type.Boolean(),
  duplicate: Type.Boolean(),
  stale: Type.Boolean(),
  eventId: Type.String(),
  taskId: Type.String(),
  stepKey: Type.Union([Type.String(), Type.Null()]),
  /** @deprecated use stepKey */
  stepId: Type.Union([Type.String(), Type.Null()], { description: 'Deprecated: use stepKey' }),
  operationCode: Type.Union([Type.String(), Type.Null()]),
  taskVersion: Version,
  stepVersion: Type.Union([Version, Type.Null()]),
  lifecycleStatus: LifecycleStatus,
  businessStatus: Type.String(),
  committedAt: Type.String(),
});
export type EventResult = Static<typeof EventResult>;

export const BatchEventItem = Type.Union([
  Type.Intersect([CompactTaskEvent]),
  Type.Intersect([FullTaskEvent, Type.Object({ executionToken: Type.Optional(Type.String()) })]),
]);

export const BatchItemResult = Type.Object({
  index: Type.Integer(),
  eventId: Type.Union([Type.String(), Type.Null()]),
  ok: Type.Boolean(),
  result: Type.Optional(EventResult),
  error: Type.Optional(Type.Object({ code: Type.String(), status: Type.Integer(), detail: Type.String() })),
});
export type BatchItemResult = Static<typeof BatchItemResult>;

export const HeartbeatItem = Type.Object(
  {
    executionHandle: Type.Optional(Type.String({ minLength: 10, maxLength: 100 })),
    executionToken: Type.Optional(Type.String({ minLength: 10, maxLength: 4096 })),
    taskId: Type.Optional(Uuid),
    stepId: Type.Optional(Key),
    stepAttempt: Type.Optional(Type.Integer({ minimum: 1 })),
    executionId: Type.Optional(Uuid),
    heartbeatSeq: Type.Integer({ minimum: 1 }),
    observedAt: Type.Optional(Type.String({ format: 'date-time' })),
  },
  Strict,
);
export type HeartbeatItem = Static<typeof HeartbeatItem>;

export const HeartbeatOutcome = Type.Union([
  Type.Literal('ACCEPTED'),
  Type.Literal('DUPLICATE'),
  Type.Literal('STALE_ATTEMPT'),
  Type.Literal('WRONG_EXECUTION'),
  Type.Literal('TERMINAL'),
  Type.Literal('NOT_RUNNING'),
  Type.Literal('RECOVERED'),
  Type.Literal('INVALID_CREDENTIAL'),
]);
export type HeartbeatOutcome = Static<typeof HeartbeatOutcome>;

/**
 * What a heartbeat batch answers: `all` (the default) one result per item; `exceptions` only the items
 * whose outcome is not ACCEPTED (refusals and recoveries), each with its index, and `acceptedCount`.
 */
export const HeartbeatAnswer = Type.Union([Type.Literal('all'), Type.Literal('exceptions')]);
export type HeartbeatAnswer = Static<typeof HeartbeatAnswer>;

/**
 * One answer per heartbeat item. Its choices are written as `enum` and a type list rather than unions:
 * the response serializer checks each union's branches against the value for every item of every batch.
 */
export const HeartbeatResult = Type.Object({
  index: Type.Integer(),
  attemptId: Type.Unsafe<string | null>({ type: ['string', 'null'] }),
  /** @deprecated use attemptId */
  executionId: Type.Unsafe<string | null>({
    type: ['string', 'null'],
    description: 'Deprecated: use attemptId',
  }),
  accepted: Type.Boolean(),
  outcome: Type.Unsafe<HeartbeatOutcome>({
    type: 'string',
    enum: HeartbeatOutcome.anyOf.map((literal) => literal.const),
  }),
  health: Type.Unsafe<Health | null>({
    type: ['string', 'null'],
    enum: [...Health.anyOf.map((literal) => literal.const), null],
  }),
});
export type HeartbeatResult = Static<typeof HeartbeatResult>;

export const ClassificationRequest = Type.Object(
  {
    productId: Type.Optional(
      Type.Union([Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._-]+$' }), Type.Null()]),
    ),
    taskType: Type.Optional(Code),
    statusDefinitionVersion: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_147_483_647 })),
  },
  Strict,
);
export type ClassificationRequest = Static<typeof ClassificationRequest>;

export const StatusDefinitionEntry = Type.Object(
  {
    code: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Z0-9_]+$' }),
    displayName: Type.String({ minLength: 1, maxLength: 128 }),
    lifecycleStatus: LifecycleStatus,
    terminal: Type.Optional(Type.Boolean()),
    severity: Type.Optional(
      Type.Union([
        Type.Literal('INFO'),
        Type.Literal('WARNING'),
        Type.Literal('ERROR'),
        Type.Literal('ACTION_REQUIRED'),
      ]),
    ),
    sortOrder: Type.Optional(Type.Integer()),
    presentation: Type.Optional(Type.Record(Type.String(), Type.String({ maxLength: 200 }))),
    /** Business statuses this one may follow; empty or absent: any. */
    allowedFrom: Type.Optional(Type.Array(Type.String(), { maxItems: 100 })),
  },
  Strict,
);
export type StatusDefinitionEntry = Static<typeof StatusDefinitionEntry>;

/** A status or operation definition's version (a PostgreSQL integer). */
const RegistryVersion = Type.Integer({ minimum: 1, maximum: 2_147_483_647 });

export const StatusDefinitionRequest = Type.Object(
  {
    taskType: Code,
    version: RegistryVersion,
    statuses: Type.Array(StatusDefinitionEntry, { minItems: 1, maxItems: 200 }),
  },
  Strict,
);
export type StatusDefinitionRequest = Static<typeof StatusDefinitionRequest>;

export const OperationDefinitionRequest = Type.Object(
  {
    operationCode: Code,
    version: RegistryVersion,
    displayName: Type.String({ minLength: 1, maxLength: 128 }),
    taskTypePattern: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    producerPattern: Type.String({ minLength: 1, maxLength: 255 }),
    allowedEventTypes: Type.Array(
      Type.Union([
        Type.Literal('STEP_STARTED'),
        Type.Literal('STEP_PROGRESS'),
        Type.Literal('STEP_COMPLETED'),
        Type.Literal('STEP_FAILED'),
      ]),
      { minItems: 1 },
    ),
    /** data.schema name → the JSON Schema of data.value and the event types that may carry it. */
    dataSchemas: Type.Record(
      Type.String({ minLength: 1, maxLength: 128 }),
      Type.Object(
        {
          eventTypes: Type.Array(Type.String(), { minItems: 1 }),
          jsonSchema: Type.Record(Type.String(), Type.Unknown()),
        },
        Strict,
      ),
    ),
    failurePolicy: Type.Optional(FailurePolicy),
  },
  Strict,
);
export type OperationDefinitionRequest = Static<typeof OperationDefinitionRequest>;

export const AclGrantRequest = Type.Object(
  {
    principalType: Type.Union([Type.Literal('USER'), Type.Literal('PROJECT'), Type.Literal('ROLE')]),
    principalId: Type.String({ minLength: 1, maxLength: 200 }),
    permission: Type.Optional(
      Type.Union([Type.Literal('VIEW'), Type.Literal('OPERATE'), Type.Literal('ADMIN')]),
    ),
  },
  Strict,
);
export type AclGrantRequest = Static<typeof AclGrantRequest>;

export const TaskEventView = Type.Object({
  eventId: Type.String(),
  taskVersion: Version,
  stepVersion: Type.Union([Version, Type.Null()]),
  eventType: Type.String(),
  stepKey: Type.Union([Type.String(), Type.Null()]),
  /** @deprecated use stepKey */
  stepId: Type.Union([Type.String(), Type.Null()], { description: 'Deprecated: use stepKey' }),
  stepAttempt: Type.Union([Type.Integer(), Type.Null()]),
  attemptId: Type.Union([Type.String(), Type.Null()]),
  /** @deprecated use attemptId */
  executionId: Type.Union([Type.String(), Type.Null()], { description: 'Deprecated: use attemptId' }),
  operationCode: Type.Union([Type.String(), Type.Null()]),
  producerId: Type.String(),
  sourceSeq: Type.Union([Type.String(), Type.Null()]),
  lifecycleStatus: Type.Union([Type.String(), Type.Null()]),
  businessStatus: Type.Union([Type.String(), Type.Null()]),
  health: Type.Union([Type.String(), Type.Null()]),
  phaseCode: Type.Union([Type.String(), Type.Null()]),
  dataSchema: Type.Union([Type.String(), Type.Null()]),
  errorCode: Type.Union([Type.String(), Type.Null()]),
  occurredAt: Type.String(),
  receivedAt: Type.Union([Type.String(), Type.Null()]),
  committedAt: Type.String(),
  durationMs: Type.Union([Type.Integer(), Type.Null()]),
  payload: Type.Unknown(),
});
export type TaskEventView = Static<typeof TaskEventView>;

export const TaskEventPage = Type.Object({
  taskId: Type.String(),
  items: Type.Array(TaskEventView),
  /** Pass as afterTaskVersion to continue; null when the end was reached. */
  nextAfterTaskVersion: Type.Union([Version, Type.Null()]),
  oldestAvailableTaskVersion: Version,
});
export type TaskEventPage = Static<typeof TaskEventPage>;

export const BatchGetRequest = Type.Object(
  {
    tasks: Type.Array(Type.Object({ taskId: Uuid, knownVersion: Type.Optional(Version) }, Strict), {
      minItems: 1,
      maxItems: 200,
    }),
  },
  Strict,
);
export type BatchGetRequest = Static<typeof BatchGetRequest>;

export const BatchGetResult = Type.Object({
  items: Type.Array(
    Type.Object({
      taskId: Type.String(),
      found: Type.Boolean(),
      changed: Type.Boolean(),
      taskVersion: Type.Union([Version, Type.Null()]),
      snapshot: Type.Optional(TaskWithExecution),
    }),
  ),
});
export type BatchGetResult = Static<typeof BatchGetResult>;

export const UserTokenRequest = Type.Object(
  {
    userId: Type.String({ minLength: 1, maxLength: 200 }),
    projects: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 100 })),
    roles: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 100 })),
    ttlSeconds: Type.Optional(Type.Integer({ minimum: 30, maximum: 86_400 })),
  },
  Strict,
);
export type UserTokenRequest = Static<typeof UserTokenRequest>;

export const TaskSummary = Type.Object({
  taskId: Type.String(),
  workflowId: Type.String(),
  taskVersion: Version,
  title: Type.String(),
  taskType: Type.Union([Type.String(), Type.Null()]),
  productId: Type.Union([Type.String(), Type.Null()]),
  lifecycleStatus: LifecycleStatus,
  businessStatus: Type.String(),
  health: Health,
  progressPercent: Type.Union([Type.Number(), Type.Null()]),
  error: Type.Union([
    Type.Object({ code: Type.String(), userMessage: Type.Union([Type.String(), Type.Null()]) }),
    Type.Null(),
  ]),
  createdAt: Type.String(),
  updatedAt: Type.String(),
  // As the realtime summary has them: a page counts elapsed time from the list alone.
  startedAt: Type.Union([Type.String(), Type.Null()]),
  finishedAt: Type.Union([Type.String(), Type.Null()]),
});
export type TaskSummary = Static<typeof TaskSummary>;
