-- Schedules: a cron expression in a time zone that starts tasks of a published workflow.
-- The schedule loop claims a due row with FOR UPDATE SKIP LOCKED, creates its task with the
-- idempotency key schedule:<id>:<fire time>, and advances next_fire_at before it commits, so two
-- replicas (or a restart between the create and the advance) never start two tasks for one fire time.

CREATE TABLE schedule (
  id                uuid PRIMARY KEY,
  tenant_id         uuid NOT NULL REFERENCES tenant (id),
  application_id    uuid NOT NULL REFERENCES application (id),
  -- The create request's Idempotency-Key and the fingerprint of its body.
  idempotency_key   text NOT NULL,
  request_hash      text NOT NULL,
  cron              text NOT NULL,
  time_zone         text NOT NULL,
  workflow_name     text NOT NULL,
  workflow_version  text NOT NULL,
  input             jsonb NOT NULL,
  overlap           text NOT NULL CHECK (overlap IN ('SKIP', 'QUEUE_ONE', 'ALLOW')),
  start_at          timestamptz,
  end_at            timestamptz,
  paused            boolean NOT NULL DEFAULT false,
  -- The next fire time not yet handled; null once the schedule has ended.
  next_fire_at      timestamptz,
  -- A QUEUE_ONE fire waiting for the previous task to end.
  queued_fire_at    timestamptz,
  last_fire_at      timestamptz,
  last_task_id      uuid,
  last_error        text,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL,
  UNIQUE (application_id, idempotency_key)
);

-- What the loop looks for: unpaused schedules by due time, and those holding a queued fire.
CREATE INDEX schedule_due ON schedule (next_fire_at) WHERE NOT paused;
CREATE INDEX schedule_queued ON schedule (id) WHERE queued_fire_at IS NOT NULL AND NOT paused;
CREATE INDEX schedule_by_application ON schedule (application_id, created_at);
