-- Rows written for every task, step, attempt or fact carry no foreign keys. Each key cost an index probe
-- and a FOR KEY SHARE lock on the parent row per insert — about 35 probes per one-step task — and since
-- every task of an application shares the same tenant, application and definition rows, concurrent
-- creates piled their share locks onto those rows as MultiXacts. The platform writes these rows only in
-- the transaction that writes (or has locked) their parent, and never deletes a parent; the test harness
-- checks after every integration test that no such row points at nothing (test/integrity.ts).
-- Configuration rows (tenants, applications, keys, definitions, workers, nodes, credentials) keep theirs.
ALTER TABLE task
  DROP CONSTRAINT task_tenant_id_fkey,
  DROP CONSTRAINT task_application_id_fkey,
  DROP CONSTRAINT task_workflow_definition_id_fkey,
  DROP CONSTRAINT task_workflow_id_fkey;
ALTER TABLE workflow
  DROP CONSTRAINT workflow_tenant_id_fkey,
  DROP CONSTRAINT workflow_application_id_fkey;
ALTER TABLE execution DROP CONSTRAINT execution_task_id_fkey;
ALTER TABLE step
  DROP CONSTRAINT step_task_id_fkey,
  DROP CONSTRAINT step_execution_id_fkey;
ALTER TABLE task_event
  DROP CONSTRAINT task_event_task_id_fkey,
  DROP CONSTRAINT task_event_execution_id_fkey;
ALTER TABLE attempt
  DROP CONSTRAINT attempt_task_id_fkey,
  DROP CONSTRAINT attempt_step_id_fkey,
  DROP CONSTRAINT attempt_worker_id_fkey;
ALTER TABLE task_acl DROP CONSTRAINT task_acl_task_id_fkey;
ALTER TABLE task_external_ref DROP CONSTRAINT task_external_ref_task_id_fkey;
ALTER TABLE scheduling_request
  DROP CONSTRAINT scheduling_request_task_id_fkey,
  DROP CONSTRAINT scheduling_request_step_id_fkey;
ALTER TABLE worker_command DROP CONSTRAINT worker_command_worker_id_fkey;
ALTER TABLE timer DROP CONSTRAINT timer_task_id_fkey;
ALTER TABLE callback_delivery
  DROP CONSTRAINT callback_delivery_application_id_fkey,
  DROP CONSTRAINT callback_delivery_task_id_fkey,
  DROP CONSTRAINT callback_delivery_execution_id_fkey;
ALTER TABLE timeline DROP CONSTRAINT timeline_task_id_fkey;
ALTER TABLE access_grant
  DROP CONSTRAINT access_grant_attempt_id_fkey,
  DROP CONSTRAINT access_grant_application_id_fkey;

-- Updates of a task or workflow row change no indexed column any more, so PostgreSQL can update them
-- in place (HOT: no new index entries) when the page has room, which the fill factor leaves. The
-- owner's list still sorts by updated_at, on the rows of that owner (the index finds them); nothing read
-- workflows by owner.
DROP INDEX task_by_owner;
CREATE INDEX task_by_owner ON task (tenant_id, owner_id) WHERE owner_id IS NOT NULL;
DROP INDEX workflow_by_owner;
ALTER TABLE task SET (fillfactor = 80);
ALTER TABLE workflow SET (fillfactor = 80);
ALTER TABLE execution SET (fillfactor = 80);
