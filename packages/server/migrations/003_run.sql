-- Running the work: worker credentials, nodes and sessions, scheduling requests, durable worker
-- commands, timers, callback deliveries and the per-execution timeline.

CREATE TABLE worker_credential (
  id           text PRIMARY KEY,
  secret_hash  bytea NOT NULL,
  label        text,
  created_at   timestamptz NOT NULL,
  revoked_at   timestamptz
);

-- Machines, registered by an operator: only these labels are trusted for placement.
CREATE TABLE worker_node (
  id                 text PRIMARY KEY,
  labels             jsonb NOT NULL DEFAULT '{}',
  group_name         text,
  weight             integer NOT NULL DEFAULT 100,
  management_status  text NOT NULL DEFAULT 'ACTIVE' CHECK (management_status IN ('ACTIVE', 'CORDONED')),
  created_at         timestamptz NOT NULL,
  updated_at         timestamptz NOT NULL
);

-- A worker session: one run of the worker runtime on a node.
CREATE TABLE worker (
  id                 uuid PRIMARY KEY,
  instance_id        text NOT NULL,
  name               text NOT NULL,
  node_id            text NOT NULL REFERENCES worker_node (id),
  credential_id      text NOT NULL REFERENCES worker_credential (id),
  capabilities       jsonb NOT NULL,
  claimed_labels     jsonb NOT NULL DEFAULT '{}',
  resources          jsonb NOT NULL,
  max_concurrency    integer NOT NULL,
  runtime_state      text NOT NULL DEFAULT 'READY' CHECK (runtime_state IN ('READY', 'DRAINING')),
  scheduling_status  text NOT NULL DEFAULT 'ELIGIBLE' CHECK (scheduling_status IN ('ELIGIBLE', 'INELIGIBLE')),
  running_attempts   integer NOT NULL DEFAULT 0,
  last_heartbeat_at  timestamptz NOT NULL,
  created_at         timestamptz NOT NULL,
  ended_at           timestamptz
);
CREATE INDEX worker_live ON worker (last_heartbeat_at) WHERE ended_at IS NULL;

ALTER TABLE attempt
  ADD COLUMN worker_id uuid REFERENCES worker (id),
  ADD COLUMN lease_version integer NOT NULL DEFAULT 1;

-- A ready step attempt waiting for a worker; claimed by priority, then age.
CREATE TABLE scheduling_request (
  id            uuid PRIMARY KEY,
  task_id       uuid NOT NULL REFERENCES task (id),
  step_id       uuid NOT NULL UNIQUE REFERENCES step (id),
  priority      integer NOT NULL,
  status        text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'DISPATCHED', 'CANCELED')),
  reasons       jsonb NOT NULL DEFAULT '[]',
  available_at  timestamptz NOT NULL,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL
);
CREATE INDEX scheduling_request_due ON scheduling_request (priority DESC, created_at) WHERE status = 'PENDING';

-- Commands to a worker; re-sent until acknowledged. Ids are time-ordered (the SSE event id).
CREATE TABLE worker_command (
  id          uuid PRIMARY KEY,
  worker_id   uuid NOT NULL REFERENCES worker (id),
  type        text NOT NULL CHECK (type IN ('START_ATTEMPT', 'CANCEL_ATTEMPT', 'DRAIN')),
  payload     jsonb NOT NULL,
  created_at  timestamptz NOT NULL,
  acked_at    timestamptz
);
CREATE INDEX worker_command_open ON worker_command (worker_id, id) WHERE acked_at IS NULL;

CREATE TABLE timer (
  id                uuid PRIMARY KEY,
  kind              text NOT NULL,
  task_id           uuid NOT NULL REFERENCES task (id),
  step_id           uuid,
  payload           jsonb NOT NULL DEFAULT '{}',
  status            text NOT NULL DEFAULT 'PENDING'
                    CHECK (status IN ('PENDING', 'PUBLISHING', 'PUBLISHED', 'FAILED', 'DEAD')),
  attempts          integer NOT NULL DEFAULT 0,
  available_at      timestamptz NOT NULL,
  claim_id          uuid,
  claim_expires_at  timestamptz,
  last_error        text,
  created_at        timestamptz NOT NULL,
  published_at      timestamptz
);
CREATE INDEX timer_due ON timer (available_at) WHERE status IN ('PENDING', 'FAILED');
CREATE INDEX timer_claimed ON timer (claim_expires_at) WHERE status = 'PUBLISHING';

ALTER TABLE execution ADD COLUMN callback_sequence integer NOT NULL DEFAULT 0;

-- Signed callbacks to the application, one sequence per execution.
CREATE TABLE callback_delivery (
  id                uuid PRIMARY KEY,
  application_id    uuid NOT NULL REFERENCES application (id),
  task_id           uuid NOT NULL REFERENCES task (id),
  execution_id      uuid NOT NULL REFERENCES execution (id),
  sequence          integer NOT NULL,
  event_id          uuid NOT NULL,
  event_type        text NOT NULL,
  url               text NOT NULL,
  payload           jsonb NOT NULL,
  status            text NOT NULL DEFAULT 'PENDING'
                    CHECK (status IN ('PENDING', 'PUBLISHING', 'PUBLISHED', 'FAILED', 'DEAD')),
  attempts          integer NOT NULL DEFAULT 0,
  available_at      timestamptz NOT NULL,
  claim_id          uuid,
  claim_expires_at  timestamptz,
  last_error        text,
  response_status   integer,
  created_at        timestamptz NOT NULL,
  published_at      timestamptz,
  UNIQUE (execution_id, sequence)
);
CREATE INDEX callback_delivery_due ON callback_delivery (available_at) WHERE status IN ('PENDING', 'FAILED');
CREATE INDEX callback_delivery_claimed ON callback_delivery (claim_expires_at) WHERE status = 'PUBLISHING';
CREATE INDEX callback_delivery_by_task ON callback_delivery (task_id, sequence);

-- Human-readable milestones per execution.
CREATE TABLE timeline (
  id            uuid PRIMARY KEY,
  -- Insertion order: milestones of one transaction share a timestamp.
  position      bigserial NOT NULL,
  task_id       uuid NOT NULL REFERENCES task (id),
  execution_id  uuid NOT NULL,
  kind          text NOT NULL,
  message       text NOT NULL,
  data          jsonb NOT NULL DEFAULT '{}',
  at            timestamptz NOT NULL
);
CREATE INDEX timeline_by_task ON timeline (task_id, position);
