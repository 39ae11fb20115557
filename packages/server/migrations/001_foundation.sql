-- Foundation: identity, workflow definitions, tasks with their first execution, the event log,
-- idempotency records, the domain-event outbox and consumer inboxes.

CREATE TABLE tenant (
  id          uuid PRIMARY KEY,
  name        text NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL
);

-- An application is the trusted authority scope: its API keys, callback secret and resource provider.
CREATE TABLE application (
  id                                   uuid PRIMARY KEY,
  tenant_id                            uuid NOT NULL REFERENCES tenant (id),
  name                                 text NOT NULL,
  callback_secret_sealed               text NOT NULL,
  previous_callback_secret_sealed      text,
  previous_callback_secret_expires_at  timestamptz,
  resource_provider_url                text,
  resource_provider_token_sealed       text,
  created_at                           timestamptz NOT NULL,
  updated_at                           timestamptz NOT NULL,
  UNIQUE (tenant_id, name)
);

-- Only a hash of the secret part is stored; the key id (public) finds the row.
CREATE TABLE api_key (
  id              text PRIMARY KEY,
  application_id  uuid NOT NULL REFERENCES application (id),
  secret_hash     bytea NOT NULL,
  label           text,
  created_at      timestamptz NOT NULL,
  expires_at      timestamptz,
  revoked_at      timestamptz
);
CREATE INDEX api_key_by_application ON api_key (application_id);

CREATE TABLE workflow_definition (
  id                   uuid PRIMARY KEY,
  tenant_id            uuid NOT NULL REFERENCES tenant (id),
  name                 text NOT NULL,
  version              text NOT NULL,
  description          text,
  input_schema         jsonb NOT NULL,
  steps                jsonb NOT NULL,
  content_hash         text NOT NULL,
  published_by         uuid NOT NULL REFERENCES application (id),
  published_at         timestamptz NOT NULL,
  UNIQUE (tenant_id, name, version)
);

CREATE TABLE task (
  id                      uuid PRIMARY KEY,
  tenant_id               uuid NOT NULL REFERENCES tenant (id),
  application_id          uuid NOT NULL REFERENCES application (id),
  workflow_definition_id  uuid NOT NULL REFERENCES workflow_definition (id),
  workflow_name           text NOT NULL,
  workflow_version        text NOT NULL,
  name                    text NOT NULL,
  external_ref            text,
  input                   jsonb NOT NULL,
  callback_url            text,
  priority                integer NOT NULL,
  owner_id                text,
  lifecycle_status        text NOT NULL,
  version                 bigint NOT NULL,
  current_execution_id    uuid NOT NULL,
  created_at              timestamptz NOT NULL,
  updated_at              timestamptz NOT NULL
);
CREATE INDEX task_by_application ON task (application_id, id DESC);
CREATE INDEX task_by_external_ref ON task (application_id, external_ref) WHERE external_ref IS NOT NULL;

-- One run of a task. `snapshot` is the definition frozen at creation with the task's step constraints merged.
CREATE TABLE execution (
  id            uuid PRIMARY KEY,
  task_id       uuid NOT NULL REFERENCES task (id),
  number        integer NOT NULL,
  status        text NOT NULL,
  progress      smallint NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
  snapshot      jsonb NOT NULL,
  version       bigint NOT NULL,
  result        jsonb,
  created_at    timestamptz NOT NULL,
  started_at    timestamptz,
  completed_at  timestamptz,
  updated_at    timestamptz NOT NULL,
  UNIQUE (task_id, number)
);

CREATE TABLE step (
  id                  uuid PRIMARY KEY,
  execution_id        uuid NOT NULL REFERENCES execution (id),
  step_key            text NOT NULL,
  capability          text NOT NULL,
  capability_version  text NOT NULL,
  depends_on          text[] NOT NULL,
  status              text NOT NULL,
  version             bigint NOT NULL,
  created_at          timestamptz NOT NULL,
  updated_at          timestamptz NOT NULL,
  UNIQUE (execution_id, step_key)
);

-- The immutable log of facts about a task, ordered by task version.
CREATE TABLE task_event (
  id              uuid PRIMARY KEY,
  task_id         uuid NOT NULL REFERENCES task (id),
  execution_id    uuid NOT NULL REFERENCES execution (id),
  task_version    bigint NOT NULL,
  type            text NOT NULL,
  producer        text NOT NULL,
  payload         jsonb NOT NULL,
  occurred_at     timestamptz NOT NULL,
  committed_at    timestamptz NOT NULL,
  UNIQUE (task_id, task_version)
);

-- The answer to a write, kept so a retry with the same key gets the same answer.
CREATE TABLE idempotency (
  principal        text NOT NULL,
  operation        text NOT NULL,
  key              text NOT NULL,
  request_hash     text NOT NULL,
  response_status  integer NOT NULL,
  response_body    jsonb NOT NULL,
  created_at       timestamptz NOT NULL,
  PRIMARY KEY (principal, operation, key)
);

-- Domain events waiting to leave the database. Claimed with the shared lease mechanism (claims.ts).
CREATE TABLE outbox_event (
  id                uuid PRIMARY KEY,
  tenant_id         uuid NOT NULL,
  application_id    uuid NOT NULL,
  aggregate_id      uuid NOT NULL,
  event_type        text NOT NULL,
  payload           jsonb NOT NULL,
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
CREATE INDEX outbox_event_due ON outbox_event (available_at) WHERE status IN ('PENDING', 'FAILED');
CREATE INDEX outbox_event_claimed ON outbox_event (claim_expires_at) WHERE status = 'PUBLISHING';

-- Consumers remember which events they have applied, in the same transaction as the effect.
CREATE TABLE consumer_inbox (
  consumer      text NOT NULL,
  event_id      uuid NOT NULL,
  processed_at  timestamptz NOT NULL,
  PRIMARY KEY (consumer, event_id)
);
