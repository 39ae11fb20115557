/**
 * Step kinds besides the capability step. Each kind's options live under a key of the kind's own name
 * (`{ "kind": "sleep", "sleep": { "durationMs": 500 } }`). A step without `kind` is a capability step.
 *
 * Glossary
 * - capability: work a registered worker does (the first kind).
 * - approval: waits for people to approve or reject; the decisions are the step's output.
 * - signal: waits for a named signal sent to the task (`POST /v1/tasks/{id}/signals/{name}`).
 * - sleep: a durable timer, for a duration or until a time read from the input.
 * - map: one capability run per item of an array; the outputs in item order are the step's output.
 * - task: starts a task of another workflow (a child task) and waits for its end.
 * - waiting for: what a running platform step waits on, shown on the task (`waitingFor`).
 */
import { type Static, Type } from 'typebox';
import { ApprovalDecision } from './approvals.ts';

const Strict = { additionalProperties: false } as const;

export const StepKind = Type.Union([
  Type.Literal('capability'),
  Type.Literal('approval'),
  Type.Literal('signal'),
  Type.Literal('sleep'),
  Type.Literal('map'),
  Type.Literal('task'),
]);
export type StepKind = Static<typeof StepKind>;

/** Definitions published before step kinds have no `kind`: they are capability steps. */
export const stepKind = (step: { kind?: StepKind | undefined }): StepKind => step.kind ?? 'capability';

/** A `$.input…` or `$.steps.<key>.output…` reference (checked at publish). */
const Reference = Type.String({ minLength: 3, maxLength: 500, pattern: '^\\$\\.' });
const Limit = Type.Integer({ minimum: 1, maximum: 2_592_000_000 });
const Names = Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 100 });

export const SleepOptions = Type.Object(
  {
    durationMs: Type.Optional(Limit),
    /** A reference to an ISO 8601 time, e.g. `$.input.notBefore`. */
    until: Type.Optional(Reference),
  },
  Strict,
);
export type SleepOptions = Static<typeof SleepOptions>;

export const SignalName = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z][A-Za-z0-9_.-]*$' });

export const SignalOptions = Type.Object(
  {
    name: SignalName,
    /** A JSON Schema the signal's payload must meet; a payload that fails it is refused (422). */
    payloadSchema: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    timeoutMs: Type.Optional(Limit),
  },
  Strict,
);
export type SignalOptions = Static<typeof SignalOptions>;

export const Approvers = Type.Object(
  {
    users: Type.Optional(Names),
    roles: Type.Optional(Names),
    projects: Type.Optional(Names),
    /** The task's owner may decide. */
    owner: Type.Optional(Type.Boolean()),
  },
  Strict,
);
export type Approvers = Static<typeof Approvers>;

export const ApprovalOnTimeout = Type.Union([
  Type.Literal('REJECT'),
  Type.Literal('FAIL'),
  Type.Literal('CONTINUE'),
]);

export const ApprovalOptions = Type.Object(
  {
    approvers: Approvers,
    required: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    /** May the person who submitted the task approve it? Default false. */
    allowSubmitter: Type.Optional(Type.Boolean()),
    timeoutMs: Type.Optional(Limit),
    onTimeout: Type.Optional(ApprovalOnTimeout),
    /** A JSON Schema for the decision's `data`. */
    formSchema: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  Strict,
);
export type ApprovalOptions = Static<typeof ApprovalOptions>;

export const MapOptions = Type.Object(
  {
    items: Reference,
    capability: Type.String({ minLength: 1, maxLength: 200 }),
    capabilityVersion: Type.String({ minLength: 1, maxLength: 50 }),
    /** Like a step's inputMapping; `$.item` (or `$.item.field`) reads the item. */
    inputMapping: Type.Optional(Type.Record(Type.String({ minLength: 1 }), Type.Unknown())),
    maxParallel: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
    onItemFailure: Type.Optional(Type.Union([Type.Literal('FAIL_ALL'), Type.Literal('CONTINUE')])),
  },
  Strict,
);
export type MapOptions = Static<typeof MapOptions>;

export const ChildTaskOptions = Type.Object(
  {
    workflowName: Type.String({ minLength: 1, maxLength: 200 }),
    workflowVersion: Type.String({ minLength: 1, maxLength: 64 }),
    inputMapping: Type.Optional(Type.Record(Type.String({ minLength: 1 }), Type.Unknown())),
  },
  Strict,
);
export type ChildTaskOptions = Static<typeof ChildTaskOptions>;

/** The kind options of a step, in the input and in the stored definition alike. */
export const StepKindOptions = {
  kind: Type.Optional(StepKind),
  sleep: Type.Optional(SleepOptions),
  signal: Type.Optional(SignalOptions),
  approval: Type.Optional(ApprovalOptions),
  map: Type.Optional(MapOptions),
  task: Type.Optional(ChildTaskOptions),
};

const Since = { since: Type.String({ format: 'date-time' }) };

/** What a running platform step waits for (`waitingFor` on the step). */
export const WaitingFor = Type.Union([
  Type.Object({ kind: Type.Literal('sleep'), until: Type.String({ format: 'date-time' }), ...Since }),
  Type.Object({
    kind: Type.Literal('signal'),
    name: Type.String(),
    timeoutAt: Type.Optional(Type.String({ format: 'date-time' })),
    ...Since,
  }),
  Type.Object({
    kind: Type.Literal('approval'),
    approvers: Approvers,
    required: Type.Integer(),
    decisions: Type.Array(ApprovalDecision),
    timeoutAt: Type.Optional(Type.String({ format: 'date-time' })),
    ...Since,
  }),
  Type.Object({
    kind: Type.Literal('task'),
    childTaskId: Type.Union([Type.String(), Type.Null()]),
    ...Since,
  }),
  Type.Object({
    kind: Type.Literal('map'),
    total: Type.Integer(),
    succeeded: Type.Integer(),
    failed: Type.Integer(),
    running: Type.Integer(),
    ...Since,
  }),
]);
export type WaitingFor = Static<typeof WaitingFor>;

export const SendSignalRequest = Type.Object({ payload: Type.Optional(Type.Unknown()) }, Strict);
export type SendSignalRequest = Static<typeof SendSignalRequest>;

/** The operator's signal (admin token): the same, with a reason kept with the fact. */
export const OperatorSignalRequest = Type.Object(
  { payload: Type.Optional(Type.Unknown()), reason: Type.String({ minLength: 1, maxLength: 2000 }) },
  Strict,
);
export type OperatorSignalRequest = Static<typeof OperatorSignalRequest>;

/** The answer to a signal: 202 when sent, 200 when a repeat of the same request (`replayed`). */
export const SignalSent = Type.Object({
  signalId: Type.String(),
  taskId: Type.String(),
  name: Type.String(),
  /** The signal step that took it at once; null when it is kept for a step not reached yet. */
  consumedByStep: Type.Union([Type.String(), Type.Null()]),
  replayed: Type.Boolean(),
});
export type SignalSent = Static<typeof SignalSent>;
