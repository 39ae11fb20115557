-- Fan-out over data (kind "map"): one row per item of a map step, written once in bulk when the step
-- begins. Items are not steps: a task's steps are all read with every fact, and a 10,000-item map must
-- not make each fact read or write 10,000 rows. The map step row keeps the counters (waiting_for); an
-- item's attempt is an ordinary attempt row that names its item (attempt.item_index).
CREATE TABLE map_item (
  step_id     uuid NOT NULL,
  item_index  integer NOT NULL,
  status      text NOT NULL DEFAULT 'PENDING'
              CHECK (status IN ('PENDING', 'RUNNING', 'WAITING_RETRY', 'SUCCEEDED', 'FAILED', 'CANCELED')),
  -- Attempts started so far (0 until the first placement), and the open or last one.
  attempt     integer NOT NULL DEFAULT 0,
  attempt_id  uuid,
  output      jsonb,
  error       jsonb,
  updated_at  timestamptz NOT NULL,
  PRIMARY KEY (step_id, item_index)
) WITH (fillfactor = 80);
-- Placement takes the lowest pending indexes first.
CREATE INDEX map_item_pending ON map_item (step_id, item_index) WHERE status = 'PENDING';

ALTER TABLE attempt ADD COLUMN item_index integer;
