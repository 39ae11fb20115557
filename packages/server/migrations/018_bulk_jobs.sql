-- Bulk operator jobs (POST /admin/v1/tasks:bulkCancel and :bulkRetry). The filter is evaluated once,
-- when the job is created: the matching tasks are frozen in bulk_job_task in creation order, so the
-- job's progress has a fixed denominator and its cursor (the last position handled) is a resume point.
-- Any replica's loop may run a RUNNING job whose claim has expired (SKIP LOCKED); it moves the cursor
-- one task at a time, under its claim, so a replica that dies leaves at most one task to do again (a
-- cancel or retry of it is then answered "already", and counted skipped).
CREATE TABLE bulk_job (
  id                uuid PRIMARY KEY,
  action            text NOT NULL CHECK (action IN ('CANCEL', 'RETRY')),
  idempotency_key   text NOT NULL UNIQUE,
  request_hash      text NOT NULL,
  filter            jsonb NOT NULL,
  reason            text NOT NULL,
  actor             text NOT NULL,
  status            text NOT NULL CHECK (status IN ('RUNNING', 'SUCCEEDED', 'FAILED')),
  matched           integer NOT NULL,
  done              integer NOT NULL DEFAULT 0,
  failed            integer NOT NULL DEFAULT 0,
  skipped           integer NOT NULL DEFAULT 0,
  -- Position (in bulk_job_task) of the last task handled; 0 before the first.
  cursor            integer NOT NULL DEFAULT 0,
  claim_id          uuid,
  claim_expires_at  timestamptz,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL,
  finished_at       timestamptz
);
CREATE INDEX bulk_job_running ON bulk_job (created_at) WHERE status = 'RUNNING';

CREATE TABLE bulk_job_task (
  job_id          uuid NOT NULL REFERENCES bulk_job (id) ON DELETE CASCADE,
  position        integer NOT NULL,
  task_id         uuid NOT NULL,
  tenant_id       uuid NOT NULL,
  application_id  uuid NOT NULL,
  -- DONE, SKIPPED or FAILED once handled (with why, for the last two).
  outcome         text,
  detail          text,
  PRIMARY KEY (job_id, position)
);
