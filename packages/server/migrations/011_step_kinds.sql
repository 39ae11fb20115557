-- Step kinds: a running approval, signal, sleep, map or child-task step records what it waits
-- for, shown on the task as `waitingFor`. Signals sent to a task are kept until a signal step takes them
-- (one sent before its step is reached waits for it). The request's Idempotency-Key is kept with the
-- other idempotency records, so a repeat stores nothing.
ALTER TABLE step ADD COLUMN waiting_for jsonb;

CREATE TABLE task_signal (
  id               uuid PRIMARY KEY,
  task_id          uuid NOT NULL REFERENCES task (id),
  name             text NOT NULL,
  payload          jsonb,
  consumed_by_step uuid,
  consumed_at      timestamptz,
  created_at       timestamptz NOT NULL
);
CREATE INDEX task_signal_waiting ON task_signal (task_id, name, created_at) WHERE consumed_at IS NULL;
