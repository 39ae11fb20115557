-- One spelling of cancelled (docs/architecture.md, "Wire versions and deprecations"): the task said CANCELLED while executions, steps, map items
-- and scheduling requests said CANCELED (and CANCELING). Every status now says CANCELLED / CANCELLING; this
-- rewrites the stored rows, the constraints that name the old value and the one partial index that does.
-- Events keep their history but speak the new words, so a reader of the log sees one vocabulary too.

ALTER TABLE scheduling_request DROP CONSTRAINT IF EXISTS scheduling_request_status_check;
UPDATE scheduling_request SET status = 'CANCELLED' WHERE status = 'CANCELED';
ALTER TABLE scheduling_request
  ADD CONSTRAINT scheduling_request_status_check CHECK (status IN ('PENDING', 'DISPATCHED', 'CANCELLED'));

ALTER TABLE map_item DROP CONSTRAINT IF EXISTS map_item_status_check;
UPDATE map_item SET status = 'CANCELLED' WHERE status = 'CANCELED';
ALTER TABLE map_item ADD CONSTRAINT map_item_status_check
  CHECK (status IN ('PENDING', 'RUNNING', 'WAITING_RETRY', 'SUCCEEDED', 'FAILED', 'CANCELLED'));

UPDATE execution SET status = CASE status WHEN 'CANCELED' THEN 'CANCELLED' ELSE 'CANCELLING' END
  WHERE status IN ('CANCELED', 'CANCELING');
UPDATE step SET status = 'CANCELLED' WHERE status = 'CANCELED';
UPDATE timeline SET kind = 'CANCELLED' WHERE kind = 'CANCELED';

-- An execution's status change carries { status, previousStatus } in its event's payload.
UPDATE task_event
SET payload = payload
  || CASE payload->>'status' WHEN 'CANCELED' THEN '{"status":"CANCELLED"}'::jsonb
                             WHEN 'CANCELING' THEN '{"status":"CANCELLING"}'::jsonb ELSE '{}'::jsonb END
  || CASE payload->>'previousStatus' WHEN 'CANCELED' THEN '{"previousStatus":"CANCELLED"}'::jsonb
                                     WHEN 'CANCELING' THEN '{"previousStatus":"CANCELLING"}'::jsonb ELSE '{}'::jsonb END
WHERE payload->>'status' IN ('CANCELED', 'CANCELING') OR payload->>'previousStatus' IN ('CANCELED', 'CANCELING');

DROP INDEX IF EXISTS execution_unfinished_on_temporal;
CREATE INDEX execution_unfinished_on_temporal ON execution (id)
  WHERE snapshot->>'engine' = 'temporal' AND status NOT IN ('SUCCEEDED', 'FAILED', 'TIMED_OUT', 'CANCELLED');
