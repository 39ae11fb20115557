-- Status service (docs/status.md): workflows grouping tasks, step attempts with their execution
-- instances, the full event log with dedup, ACL, external references, registries and realtime projections.

CREATE TABLE workflow (
  id                   uuid PRIMARY KEY,
  tenant_id            uuid NOT NULL REFERENCES tenant (id),
  application_id       uuid NOT NULL REFERENCES application (id),
  client_workflow_key  text NOT NULL,
  owner_id             text,
  title                text NOT NULL,
  workflow_type        text,
  lifecycle_status     text NOT NULL,
  version              bigint NOT NULL,
  task_count           integer NOT NULL DEFAULT 0,
  -- Tasks per lifecycle status: the aggregate the workflow version orders.
  task_counts          jsonb NOT NULL DEFAULT '{}',
  request_hash         text NOT NULL,
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL,
  UNIQUE (application_id, client_workflow_key)
);
CREATE INDEX workflow_by_owner ON workflow (application_id, owner_id, updated_at DESC);

ALTER TABLE task
  ALTER COLUMN workflow_definition_id DROP NOT NULL,
  ALTER COLUMN workflow_name DROP NOT NULL,
  ALTER COLUMN workflow_version DROP NOT NULL,
  ADD COLUMN workflow_id uuid REFERENCES workflow (id),
  ADD COLUMN client_task_key text,
  ADD COLUMN task_type text,
  ADD COLUMN product_id text,
  ADD COLUMN business_status text,
  ADD COLUMN status_definition_version integer,
  ADD COLUMN health text NOT NULL DEFAULT 'HEALTHY',
  ADD COLUMN coordinator_source_seq bigint NOT NULL DEFAULT 0,
  ADD COLUMN dynamic_policy jsonb NOT NULL DEFAULT '{}',
  ADD COLUMN dynamic_step_count integer NOT NULL DEFAULT 0,
  ADD COLUMN failure jsonb,
  ADD COLUMN started_at timestamptz,
  ADD COLUMN finished_at timestamptz,
  ADD COLUMN duration_ms bigint,
  -- Events with task_version below this were pruned from task_event.
  ADD COLUMN events_pruned_before bigint NOT NULL DEFAULT 1,
  ADD CONSTRAINT task_workflow_client_key UNIQUE (workflow_id, client_task_key);
-- Tasks from before this migration each get the implicit workflow that POST /v1/tasks now creates.
INSERT INTO workflow (id, tenant_id, application_id, client_workflow_key, owner_id, title, lifecycle_status, version,
                      task_count, task_counts, request_hash, created_at, updated_at)
SELECT t.id, t.tenant_id, t.application_id, 'task:' || t.id, t.owner_id, t.name, t.lifecycle_status, 1, 1,
       jsonb_build_object(t.lifecycle_status, 1), '', t.created_at, t.updated_at
FROM task t;
UPDATE task SET workflow_id = id, client_task_key = 'task', business_status = lifecycle_status;
ALTER TABLE task ALTER COLUMN workflow_id SET NOT NULL, ALTER COLUMN business_status SET NOT NULL,
                 ALTER COLUMN client_task_key SET NOT NULL;
CREATE INDEX task_by_owner ON task (tenant_id, owner_id, updated_at DESC, id) WHERE owner_id IS NOT NULL;
CREATE INDEX task_by_workflow ON task (workflow_id, id);

-- A step row is one attempt of one step of one execution (task run). `attempt_id` is the execution
-- instance producers report for (`executionId` on the wire).
ALTER TABLE step
  DROP CONSTRAINT step_execution_id_step_key_key,
  ADD COLUMN task_id uuid REFERENCES task (id),
  ADD COLUMN attempt integer NOT NULL DEFAULT 1,
  ADD COLUMN client_step_key text,
  ADD COLUMN operation_code text,
  ADD COLUMN operation_definition_version integer,
  ADD COLUMN expected_producer text,
  ADD COLUMN failure_policy text NOT NULL DEFAULT 'FAIL_TASK',
  ADD COLUMN dynamic boolean NOT NULL DEFAULT false,
  ADD COLUMN parent_attempt_id uuid,
  ADD COLUMN depth integer NOT NULL DEFAULT 0,
  ADD COLUMN display_name text,
  ADD COLUMN attempt_id uuid UNIQUE,
  -- False once a newer attempt of the same step exists: its late facts are STALE_EXECUTION.
  ADD COLUMN current boolean NOT NULL DEFAULT true,
  ADD COLUMN business_status text,
  ADD COLUMN phase_code text,
  ADD COLUMN phase_label text,
  ADD COLUMN progress jsonb,
  ADD COLUMN health text NOT NULL DEFAULT 'HEALTHY',
  -- Highest accepted sourceSeq per producer of this step attempt.
  ADD COLUMN source_seqs jsonb NOT NULL DEFAULT '{}',
  ADD COLUMN heartbeat_interval_seconds integer,
  ADD COLUMN heartbeat_timeout_seconds integer,
  ADD COLUMN last_heartbeat_seq bigint NOT NULL DEFAULT 0,
  ADD COLUMN last_heartbeat_at timestamptz,
  ADD COLUMN heartbeat_deadline_at timestamptz,
  ADD COLUMN stale_since timestamptz,
  ADD COLUMN data_schema text,
  ADD COLUMN state_data jsonb,
  ADD COLUMN started_at timestamptz,
  ADD COLUMN finished_at timestamptz,
  ADD COLUMN duration_ms bigint,
  ADD COLUMN duration_source text,
  ADD COLUMN error jsonb,
  ADD CONSTRAINT step_attempt_key UNIQUE (execution_id, step_key, attempt);
UPDATE step SET task_id = e.task_id, operation_code = step.capability, client_step_key = step.step_key
FROM execution e WHERE e.id = step.execution_id;
ALTER TABLE step ALTER COLUMN task_id SET NOT NULL, ALTER COLUMN operation_code SET NOT NULL,
                 ALTER COLUMN client_step_key SET NOT NULL;
CREATE INDEX step_by_task ON step (task_id);
-- The health reconciler's candidates: running, healthy, past their heartbeat deadline.
CREATE INDEX step_heartbeat_due ON step (heartbeat_deadline_at) WHERE status = 'RUNNING' AND health = 'HEALTHY';

-- Execution instance credentials: the compact handle is stored hashed; revoked when the step ends.
CREATE TABLE attempt (
  id                   uuid PRIMARY KEY,
  task_id              uuid NOT NULL REFERENCES task (id),
  step_id              uuid NOT NULL REFERENCES step (id),
  application_id       uuid NOT NULL,
  operation_code       text NOT NULL,
  producer_id          text NOT NULL,
  allowed_event_types  text[] NOT NULL,
  handle_hash          bytea NOT NULL UNIQUE,
  -- The handle itself, sealed, so an idempotent re-activation can hand out the same one.
  handle_sealed        text NOT NULL,
  expires_at           timestamptz NOT NULL,
  revoked_at           timestamptz,
  created_at           timestamptz NOT NULL
);

ALTER TABLE task_event
  ADD COLUMN workflow_id uuid,
  ADD COLUMN step_key text,
  ADD COLUMN step_attempt integer,
  ADD COLUMN attempt_id uuid,
  ADD COLUMN step_version bigint,
  ADD COLUMN task_attempt integer,
  ADD COLUMN operation_code text,
  ADD COLUMN source_seq bigint,
  ADD COLUMN lifecycle_status text,
  ADD COLUMN business_status text,
  ADD COLUMN health text,
  ADD COLUMN phase_code text,
  ADD COLUMN data_schema text,
  ADD COLUMN error_code text,
  ADD COLUMN received_at timestamptz,
  ADD COLUMN duration_ms bigint;

-- The first answer to each eventId, so a retry gets it back unchanged.
CREATE TABLE event_dedup (
  event_id      uuid PRIMARY KEY,
  task_id       uuid NOT NULL,
  payload_hash  text NOT NULL,
  result        jsonb NOT NULL,
  created_at    timestamptz NOT NULL
);

CREATE TABLE task_acl (
  task_id         uuid NOT NULL REFERENCES task (id),
  principal_type  text NOT NULL CHECK (principal_type IN ('USER', 'PROJECT', 'ROLE')),
  principal_id    text NOT NULL,
  permission      text NOT NULL CHECK (permission IN ('VIEW', 'OPERATE', 'ADMIN')),
  created_at      timestamptz NOT NULL,
  revoked_at      timestamptz,
  PRIMARY KEY (task_id, principal_type, principal_id)
);
CREATE INDEX task_acl_by_principal ON task_acl (principal_type, principal_id, task_id) WHERE revoked_at IS NULL;

CREATE TABLE task_external_ref (
  application_id  uuid NOT NULL,
  ref_type        text NOT NULL,
  ref_value       text NOT NULL,
  task_id         uuid NOT NULL REFERENCES task (id),
  created_at      timestamptz NOT NULL,
  PRIMARY KEY (application_id, ref_type, ref_value)
);

-- Versioned registries of status and operation definitions, per application (= authority scope).
CREATE TABLE status_definition (
  application_id  uuid NOT NULL REFERENCES application (id),
  task_type       text NOT NULL,
  version         integer NOT NULL,
  statuses        jsonb NOT NULL,
  created_at      timestamptz NOT NULL,
  PRIMARY KEY (application_id, task_type, version)
);

CREATE TABLE operation_definition (
  application_id       uuid NOT NULL REFERENCES application (id),
  operation_code       text NOT NULL,
  version              integer NOT NULL,
  display_name         text NOT NULL,
  task_type_pattern    text NOT NULL,
  producer_pattern     text NOT NULL,
  allowed_event_types  text[] NOT NULL,
  data_schemas         jsonb NOT NULL,
  failure_policy       text NOT NULL,
  enabled              boolean NOT NULL DEFAULT true,
  created_at           timestamptz NOT NULL,
  PRIMARY KEY (application_id, operation_code, version)
);

-- Projections for realtime channels, written in the fact's transaction; published by the relay.
CREATE TABLE realtime_outbox (
  id                 uuid PRIMARY KEY,
  tenant_id          uuid NOT NULL,
  aggregate_type     text NOT NULL CHECK (aggregate_type IN ('TASK', 'WORKFLOW')),
  aggregate_id       uuid NOT NULL,
  aggregate_version  bigint NOT NULL,
  channel            text NOT NULL,
  projection         text NOT NULL,
  payload            jsonb NOT NULL,
  status             text NOT NULL DEFAULT 'PENDING'
                     CHECK (status IN ('PENDING', 'PUBLISHING', 'PUBLISHED', 'FAILED', 'DEAD')),
  attempts           integer NOT NULL DEFAULT 0,
  available_at       timestamptz NOT NULL,
  claim_id           uuid,
  claim_expires_at   timestamptz,
  last_error         text,
  created_at         timestamptz NOT NULL,
  published_at       timestamptz
);
CREATE INDEX realtime_outbox_due ON realtime_outbox (available_at) WHERE status IN ('PENDING', 'FAILED');
CREATE INDEX realtime_outbox_claimed ON realtime_outbox (claim_expires_at) WHERE status = 'PUBLISHING';
CREATE INDEX realtime_outbox_by_aggregate ON realtime_outbox (aggregate_id, aggregate_version);
