-- Rerun from a step (POST /v1/tasks/{id}:retry with fromStep): a step of the new execution that reuses
-- the output of the same step in an earlier execution instead of running again names that execution.
ALTER TABLE step ADD COLUMN reused_from_execution_id uuid;
