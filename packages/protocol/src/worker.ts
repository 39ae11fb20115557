/**
 * Wire contracts of the worker protocol (docs/workers.md): what a worker sends TDP and what TDP answers,
 * including the commands of the command stream. The server validates requests with these schemas; the
 * worker runtime is typed by them; a contract test checks every reply and command against them.
 *
 * Requests are strict (an unknown field is a 400). Replies and commands the server writes without a
 * schema of its own are strict too, so that the contract test notices a field it sends but this file
 * does not describe.
 */
import { type Static, Type } from 'typebox';
import { Labels, MinimumResources, StepTimeouts } from './schemas.ts';
import { EventResult } from './status.ts';

const Strict = { additionalProperties: false } as const;
const Uuid = Type.String({ format: 'uuid' });
/** Heartbeats and acknowledgements answer 204 with no body. */
export const NoContent = Type.Null();

// --- registration and heartbeats ---------------------------------------------------------------------

export const WorkerCapability = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    version: Type.String({ minLength: 1, maxLength: 50 }),
    /**
     * At most this many attempts of this capability at once on this worker (within the worker's own
     * `maxConcurrency`), for a CPU- or memory-bound capability; none: only the worker's limit applies.
     */
    maxConcurrency: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
  },
  Strict,
);
export type WorkerCapability = Static<typeof WorkerCapability>;

/**
 * Attempts at once on a worker, all capabilities together, when its registration does not say: the
 * runtime's default and what the server assumes for a registration without `maxConcurrency`. Steps
 * mostly wait on I/O, so it is a fixed number rather than the CPUs (Hatchet's workers default to 100
 * slots; 10 leaves room for steps that hold files); a CPU-bound capability declares its own, lower one.
 */
export const defaultWorkerConcurrency = 10;

/** `POST /v1/workers/register`. Claimed labels are recorded, not trusted (placement uses the node's). */
export const WorkerRegistration = Type.Object(
  {
    instanceId: Type.String({ minLength: 1, maxLength: 200 }),
    name: Type.String({ minLength: 1, maxLength: 200 }),
    nodeId: Type.String({ minLength: 1, maxLength: 200 }),
    capabilities: Type.Array(WorkerCapability, { minItems: 1, maxItems: 200 }),
    labels: Type.Optional(Labels),
    // What the worker offers has the shape of what a step may require.
    resources: Type.Optional(MinimumResources),
    /** Attempts run at once, all capabilities together (`defaultWorkerConcurrency` when left out). */
    maxConcurrency: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
  },
  Strict,
);
export type WorkerRegistration = Static<typeof WorkerRegistration>;

/** Not strict: the server writes it through this schema, which leaves out any other field anyway. */
export const WorkerRegistered = Type.Object({
  workerId: Type.String(),
  heartbeatIntervalSeconds: Type.Integer(),
  heartbeatTtlSeconds: Type.Integer(),
  /** The server's gRPC reporting port (docs/grpc.md), on the host the worker reaches it by; absent: off. */
  grpcPort: Type.Optional(Type.Integer()),
});
export type WorkerRegistered = Static<typeof WorkerRegistered>;

export const WorkerRuntimeState = Type.Union([Type.Literal('READY'), Type.Literal('DRAINING')]);
export type WorkerRuntimeState = Static<typeof WorkerRuntimeState>;

/**
 * `POST /v1/workers/{id}/heartbeat` (an empty body is a plain heartbeat); answered with NoContent.
 * `heldAttempts`: the attempts the worker holds — running, or finished with events it has not yet had
 * acknowledged. An attempt of this session the server started longer ago than the heartbeat TTL and not
 * listed is one the worker does not know (its START never arrived, or the database lost what the worker
 * reported, after a failover or a restore): the server fails it, to be retried. Left out: not checked.
 */
export const WorkerHeartbeat = Type.Object(
  {
    runtimeState: Type.Optional(WorkerRuntimeState),
    heldAttempts: Type.Optional(Type.Array(Uuid, { maxItems: 10_000 })),
  },
  Strict,
);
export type WorkerHeartbeat = Static<typeof WorkerHeartbeat>;

// --- the command stream ------------------------------------------------------------------------------

/** Run one step attempt. Its ack may ride along with the attempt's first event. */
export const StartAttemptCommand = Type.Object(
  {
    commandId: Uuid,
    type: Type.Literal('START_ATTEMPT'),
    attemptId: Uuid,
    leaseVersion: Type.Integer({ minimum: 1 }),
    taskId: Uuid,
    /** The task's execution (one run of the whole task), not the attempt: that is `attemptId`. */
    executionId: Uuid,
    /** Optional only for commands queued by a server before it was added; read `stepKey ?? stepId`. */
    stepKey: Type.Optional(Type.String()),
    /** @deprecated use stepKey */
    stepId: Type.String({ description: 'Deprecated: use stepKey' }),
    attempt: Type.Integer({ minimum: 1 }),
    capability: Type.String(),
    capabilityVersion: Type.String(),
    input: Type.Unknown(),
    /** For attempt heartbeats (`POST /v1/task-heartbeats:batch`). */
    executionToken: Type.String(),
    heartbeatIntervalSeconds: Type.Integer({ minimum: 1 }),
    timeouts: StepTimeouts,
    /** The W3C trace context of the placement (docs/observability.md); absent with tracing off. */
    traceparent: Type.Optional(Type.String({ maxLength: 128 })),
  },
  Strict,
);
export type StartAttemptCommand = Static<typeof StartAttemptCommand>;

/** Stop an attempt: its task was cancelled, or the server failed the step (the reason is the code). */
export const CancelAttemptCommand = Type.Object(
  { commandId: Uuid, type: Type.Literal('CANCEL_ATTEMPT'), attemptId: Uuid, reason: Type.String() },
  Strict,
);
export type CancelAttemptCommand = Static<typeof CancelAttemptCommand>;

/** Take nothing new, finish or hand back what runs, then stop. */
export const DrainCommand = Type.Object({ commandId: Uuid, type: Type.Literal('DRAIN') }, Strict);
export type DrainCommand = Static<typeof DrainCommand>;

/** One event of `GET /v1/workers/{id}/commands`: its SSE `id` is `commandId`, its `data` this object. */
export const WorkerCommand = Type.Union([StartAttemptCommand, CancelAttemptCommand, DrainCommand]);
export type WorkerCommand = Static<typeof WorkerCommand>;
export type WorkerCommandType = WorkerCommand['type'];

/** `POST /v1/workers/{id}/commands:ack`: all of them, or (one not this worker's) none; NoContent. */
export const CommandAcks = Type.Object(
  { commandIds: Type.Array(Uuid, { minItems: 1, maxItems: 1000 }) },
  Strict,
);
export type CommandAcks = Static<typeof CommandAcks>;

// --- the attempt inbox -------------------------------------------------------------------------------

export const WorkerEventType = Type.Union([
  Type.Literal('STEP_STARTED'),
  Type.Literal('STEP_PROGRESS'),
  Type.Literal('STEP_COMPLETED'),
  Type.Literal('STEP_FAILED'),
]);
export type WorkerEventType = Static<typeof WorkerEventType>;

/** One fact about an attempt, under its lease version; `eventId` makes a resend safe. */
export const WorkerEvent = Type.Object(
  {
    attemptId: Uuid,
    leaseVersion: Type.Integer({ minimum: 1 }),
    eventId: Uuid,
    eventType: WorkerEventType,
    sourceSeq: Type.Integer({ minimum: 1 }),
    progress: Type.Optional(
      Type.Object(
        {
          percent: Type.Optional(Type.Number({ minimum: 0, maximum: 100 })),
          current: Type.Optional(Type.Number()),
          total: Type.Optional(Type.Number()),
          unit: Type.Optional(Type.String()),
        },
        Strict,
      ),
    ),
    phaseCode: Type.Optional(Type.String({ maxLength: 64 })),
    phaseLabel: Type.Optional(Type.String({ maxLength: 200 })),
    message: Type.Optional(Type.String({ maxLength: 500 })),
    /** STEP_COMPLETED only. */
    output: Type.Optional(Type.Unknown()),
    /** STEP_FAILED only; `category: "WORKER"` hands the attempt back (retried elsewhere). */
    error: Type.Optional(
      Type.Object(
        {
          category: Type.String(),
          code: Type.String(),
          retryable: Type.Boolean(),
          userMessage: Type.Optional(Type.String({ maxLength: 2000 })),
          /** The technical detail (a refused request, a stack): kept for developers, never shown to people. */
          detail: Type.Optional(Type.String({ maxLength: 2000 })),
          diagnosticsRef: Type.Optional(Type.String({ maxLength: 255 })),
        },
        Strict,
      ),
    ),
    durationMs: Type.Optional(Type.Integer({ minimum: 0 })),
    occurredAt: Type.Optional(Type.String({ format: 'date-time' })),
  },
  Strict,
);
export type WorkerEvent = Static<typeof WorkerEvent>;

/** `POST /v1/workers/{id}/events:batch`; at least one event or one ack (the server answers 400 else). */
export const WorkerEventsBatch = Type.Object(
  {
    events: Type.Array(WorkerEvent, { maxItems: 500 }),
    // Acknowledged in the events' commit instead of a request of their own; ids that are not this
    // worker's commands change nothing.
    commandAcks: Type.Optional(Type.Array(Uuid, { maxItems: 1000 })),
  },
  Strict,
);
export type WorkerEventsBatch = Static<typeof WorkerEventsBatch>;

/** The answer for one event, by its index: applied (or a duplicate of an applied one), or why not. */
export const WorkerEventOutcome = Type.Union([
  Type.Object(
    { index: Type.Integer(), eventId: Type.String(), ok: Type.Literal(true), result: EventResult },
    Strict,
  ),
  Type.Object(
    {
      index: Type.Integer(),
      eventId: Type.String(),
      ok: Type.Literal(false),
      code: Type.String(),
      /** The HTTP status the refusal would have on its own (0 when the status service refused it). */
      status: Type.Integer(),
      detail: Type.String(),
    },
    Strict,
  ),
]);
export type WorkerEventOutcome = Static<typeof WorkerEventOutcome>;

export const WorkerEventsBatchReply = Type.Object({ results: Type.Array(WorkerEventOutcome) }, Strict);
export type WorkerEventsBatchReply = Static<typeof WorkerEventsBatchReply>;

// --- grants (each answered with an AccessGrant, grants.ts) -----------------------------------------------------------

/** `POST /v1/attempts/{id}/grants` (with an Idempotency-Key): read or overwrite an existing resource. */
export const ResourceGrantRequest = Type.Object(
  {
    leaseVersion: Type.Integer({ minimum: 1 }),
    access: Type.Union([Type.Literal('DOWNLOAD'), Type.Literal('UPLOAD')]),
    resourceRef: Type.String({ minLength: 1, maxLength: 2048 }),
    scope: Type.Optional(Type.String({ maxLength: 256 })),
  },
  Strict,
);
export type ResourceGrantRequest = Static<typeof ResourceGrantRequest>;

/** `POST /v1/attempts/{id}/artifacts` (with an Idempotency-Key): a new output resource. */
export const ArtifactGrantRequest = Type.Object(
  {
    leaseVersion: Type.Integer({ minimum: 1 }),
    // Relative, and never climbing out with `..`.
    relativePath: Type.String({ minLength: 1, maxLength: 512, pattern: '^(?!/)(?!.*(^|/)\\.\\.(/|$)).+$' }),
    artifactType: Type.String({ minLength: 1, maxLength: 64 }),
    mediaType: Type.String({ minLength: 3, maxLength: 255, pattern: '^[\\w.+-]+/[\\w.+-]+$' }),
    maxBytes: Type.Integer({ minimum: 1 }),
  },
  Strict,
);
export type ArtifactGrantRequest = Static<typeof ArtifactGrantRequest>;

/**
 * `POST /v1/attempts/{id}/grants/{grantId}:renew` (with an Idempotency-Key of its own): a new URL and
 * expiry for a grant the attempt still needs, from the same provider allocation.
 */
export const GrantRenewalRequest = Type.Object({ leaseVersion: Type.Integer({ minimum: 1 }) }, Strict);
export type GrantRenewalRequest = Static<typeof GrantRenewalRequest>;
