/**
 * Decisions on approval steps: `POST /v1/tasks/{id}/steps/{key}:approve` and `:reject` with a
 * user token and an Idempotency-Key; the operator's, with a reason, from the dashboard or the admin API.
 */
import { type Static, Type } from 'typebox';

export const DecisionRequest = Type.Object(
  {
    comment: Type.Optional(Type.String({ maxLength: 2000 })),
    /** Checked against the step's `formSchema`, when it has one. */
    data: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: false },
);
export type DecisionRequest = Static<typeof DecisionRequest>;

export const OperatorDecisionRequest = Type.Object(
  {
    reason: Type.String({ minLength: 1, maxLength: 2000 }),
    comment: Type.Optional(Type.String({ maxLength: 2000 })),
    data: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: false },
);
export type OperatorDecisionRequest = Static<typeof OperatorDecisionRequest>;

export const StepDecisionView = Type.Object({
  decisionId: Type.String(),
  taskId: Type.String(),
  stepKey: Type.String(),
  stepAttempt: Type.Integer(),
  decision: Type.Union([Type.Literal('APPROVE'), Type.Literal('REJECT')]),
  /** `user:<userId>` or `operator`. */
  decidedBy: Type.String(),
  comment: Type.Union([Type.String(), Type.Null()]),
  data: Type.Unknown(),
  reason: Type.Optional(Type.String()),
  /** What the step became through this decision. */
  outcome: Type.Union([Type.Literal('PENDING'), Type.Literal('APPROVED'), Type.Literal('REJECTED')]),
  taskVersion: Type.String(),
  decidedAt: Type.String({ format: 'date-time' }),
});
export type StepDecisionView = Static<typeof StepDecisionView>;

/** One decision as the step shows it: in `waitingFor.decisions` while it waits, then in its output. */
export const ApprovalDecision = Type.Object({
  decidedBy: Type.String(),
  decision: Type.Union([Type.Literal('APPROVE'), Type.Literal('REJECT')]),
  decidedAt: Type.String({ format: 'date-time' }),
  comment: Type.Optional(Type.String()),
  data: Type.Optional(Type.Unknown()),
  reason: Type.Optional(Type.String()),
});
export type ApprovalDecision = Static<typeof ApprovalDecision>;
