-- Approval steps: each decision on an approval step is one immutable row, written in the
-- same transaction as the step fact it causes. One decision per person per step attempt; the
-- idempotency key is the decider's own, so a retried request finds its first answer.
CREATE TABLE step_decision (
  id               uuid PRIMARY KEY,
  task_id          uuid NOT NULL,
  step_id          uuid NOT NULL,
  step_key         text NOT NULL,
  step_attempt     integer NOT NULL,
  -- 'user:<userId>' for a user token, 'operator' for the operator (dashboard or admin API).
  decided_by       text NOT NULL,
  decision         text NOT NULL CHECK (decision IN ('APPROVE', 'REJECT')),
  comment          text,
  data             jsonb,
  -- An operator's reason (required for operator decisions; the audit of who overrode whom).
  reason           text,
  idempotency_key  text NOT NULL,
  request_hash     text NOT NULL,
  -- What the step became through this decision: still waiting, approved or rejected.
  outcome          text NOT NULL CHECK (outcome IN ('PENDING', 'APPROVED', 'REJECTED')),
  task_version     bigint NOT NULL,
  decided_at       timestamptz NOT NULL,
  UNIQUE (step_id, decided_by),
  UNIQUE (task_id, decided_by, idempotency_key)
);

-- Decisions are events: never changed, never removed (a task's rows go only with the task).
CREATE FUNCTION step_decision_is_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'step_decision rows are immutable';
END $$;
CREATE TRIGGER step_decision_immutable BEFORE UPDATE ON step_decision
  FOR EACH ROW EXECUTE FUNCTION step_decision_is_immutable();
