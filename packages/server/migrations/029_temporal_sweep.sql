-- The Temporal engine's sweep (adapters/temporal/workflowSweep.ts) looks for unfinished executions the
-- Temporal engine drives, to start the workflow of any that Temporal lost. This index holds those rows
-- alone: a native deployment keeps it empty, and a finished execution leaves it.
CREATE INDEX IF NOT EXISTS execution_unfinished_on_temporal ON execution (id)
  WHERE snapshot->>'engine' = 'temporal' AND status NOT IN ('SUCCEEDED', 'FAILED', 'TIMED_OUT', 'CANCELED');
