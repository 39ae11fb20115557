-- The operator's drain of a session remembers its command and audit record: a repeated drain answers
-- the same and writes nothing (a session drained with its node names the node's audit record).
ALTER TABLE worker ADD COLUMN drain_command_id uuid;
ALTER TABLE worker ADD COLUMN drain_audit_id uuid;

-- A node the operator drained: it is CORDONED (placed on no more) and keeps the drain's audit record,
-- so a repeated drain answers the same; an uncordon clears it.
ALTER TABLE worker_node ADD COLUMN drain_audit_id uuid;

-- The audit read API pages newest first, by action or by subject.
CREATE INDEX operator_audit_by_time ON operator_audit (created_at DESC, id DESC);
CREATE INDEX operator_audit_by_action ON operator_audit (action, created_at DESC, id DESC);
