-- Who did which operator action to what, when, and why (a worker drain today). Operator actions on a
-- task keep their reason with the fact and its timeline; a worker session has no timeline, so its
-- actions are kept here, written in the transaction that carries the action out.
CREATE TABLE operator_audit (
  id          uuid PRIMARY KEY,
  action      text NOT NULL,
  subject_id  text NOT NULL,
  actor       text NOT NULL,
  reason      text NOT NULL,
  details     jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL
);
CREATE INDEX operator_audit_by_subject ON operator_audit (subject_id, created_at);

-- When an operator drained the session: from then on it stays DRAINING whatever its heartbeats say (a
-- beat sent before the worker heard of the drain must not make it placeable again).
ALTER TABLE worker ADD COLUMN drain_requested_at timestamptz;
