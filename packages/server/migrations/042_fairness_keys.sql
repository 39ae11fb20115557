-- A third level of fair turns, between an application's fairness keys (its customers, say): a create
-- may name its task's key and weight (docs/scheduling.md); tasks without one share the key ''. The
-- request carries them from its task; `key_tag` is its place in its key's line among the application's
-- keys, compared only within the application. The application flow's `served_tag` is that level's
-- virtual time.
ALTER TABLE scheduling_request
  ADD COLUMN fairness_key text NOT NULL DEFAULT '',
  ADD COLUMN fairness_weight double precision NOT NULL DEFAULT 1,
  ADD COLUMN key_tag double precision;
-- Requests tagged before: all in the key '', in their order.
UPDATE scheduling_request SET key_tag = 0 WHERE tenant_tag IS NOT NULL AND status = 'PENDING';

-- The scheduler's looks within an application: its lowest key tags, then a key's first by order (this
-- takes the place of the application's first by order).
DROP INDEX scheduling_request_application_order;
CREATE INDEX scheduling_request_application_turns ON scheduling_request (application_id, key_tag)
  WHERE status = 'PENDING' AND parked_key IS NULL AND tenant_tag IS NOT NULL;
CREATE INDEX scheduling_request_key_order ON scheduling_request (application_id, fairness_key, order_at)
  WHERE status = 'PENDING' AND parked_key IS NULL AND tenant_tag IS NOT NULL;

-- An operator's weight for one fairness key of an application (scope 'key', id '<application id>:<key>')
-- takes the place of the weight its tasks were created with; a tenant's and an application's ids are
-- their uuids as text.
ALTER TABLE scheduling_weight ALTER COLUMN id TYPE text,
  DROP CONSTRAINT scheduling_weight_scope_check,
  ADD CONSTRAINT scheduling_weight_scope_check CHECK (scope IN ('tenant', 'application', 'key'));
