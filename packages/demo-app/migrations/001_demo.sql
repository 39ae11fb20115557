-- The demo business application's own tables, in their own schema: TDP's tables are not its business.

-- Files the application keeps: uploaded source ZIPs and the outputs TDP's workers write back.
CREATE TABLE demo.asset (
  id           uuid PRIMARY KEY,
  owner_id     text NOT NULL,
  kind         text NOT NULL CHECK (kind IN ('SOURCE_ZIP', 'OUTPUT')),
  state        text NOT NULL CHECK (state IN ('UPLOADING', 'READY')),
  file_name    text NOT NULL,
  media_type   text NOT NULL,
  size_bytes   bigint,
  sha256       text,
  -- OUTPUT: the order it was allocated for and the most a worker may write.
  order_id     uuid,
  max_bytes    bigint,
  created_at   timestamptz NOT NULL,
  ready_at     timestamptz
);

-- The business intent, saved before TDP hears of it; its status is a projection of TDP's callbacks.
CREATE TABLE demo.processing_order (
  id                  uuid PRIMARY KEY,
  owner_id            text NOT NULL,
  idempotency_key     text NOT NULL,
  request_hash        text NOT NULL,
  name                text NOT NULL,
  source_asset_id     uuid NOT NULL REFERENCES demo.asset (id),
  processing_mode     text NOT NULL,
  watermark_text      text,
  business_status     text NOT NULL,
  progress            integer NOT NULL DEFAULT 0,
  task_id             uuid,
  execution_id        uuid,
  past_execution_ids  uuid[] NOT NULL DEFAULT '{}',
  last_sequence       integer NOT NULL DEFAULT 0,
  result_asset_id     uuid REFERENCES demo.asset (id),
  failure_code        text,
  failure_message     text,
  cancel_requested_at timestamptz,
  created_at          timestamptz NOT NULL,
  updated_at          timestamptz NOT NULL,
  UNIQUE (owner_id, idempotency_key)
);
CREATE INDEX processing_order_by_owner ON demo.processing_order (owner_id, created_at DESC);
CREATE INDEX processing_order_open ON demo.processing_order (updated_at)
  WHERE business_status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELED');

-- Commands to TDP, written with the change that causes them and sent after commit until TDP answers.
CREATE TABLE demo.command_outbox (
  id            uuid PRIMARY KEY,
  order_id      uuid NOT NULL REFERENCES demo.processing_order (id),
  command       text NOT NULL CHECK (command IN ('SUBMIT', 'CANCEL')),
  status        text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'SENT', 'DEAD')),
  attempts      integer NOT NULL DEFAULT 0,
  -- Also the claim: a sender pushes it forward before calling TDP, so a crashed sender's row comes back.
  available_at  timestamptz NOT NULL,
  last_error    text,
  created_at    timestamptz NOT NULL,
  sent_at       timestamptz
);
CREATE INDEX command_outbox_due ON demo.command_outbox (available_at) WHERE status = 'PENDING';

-- Every callback accepted, once per event id: the dedup record and the evidence of what it did.
CREATE TABLE demo.callback_inbox (
  event_id      uuid PRIMARY KEY,
  order_id      uuid,
  task_id       uuid NOT NULL,
  execution_id  uuid NOT NULL,
  sequence      integer NOT NULL,
  type          text NOT NULL,
  outcome       text NOT NULL,
  body          jsonb NOT NULL,
  received_at   timestamptz NOT NULL
);
CREATE INDEX callback_inbox_by_order ON demo.callback_inbox (order_id, received_at);

-- What happened to an order, in order: the page's timeline.
CREATE TABLE demo.order_event (
  id        bigserial PRIMARY KEY,
  order_id  uuid NOT NULL REFERENCES demo.processing_order (id),
  at        timestamptz NOT NULL,
  kind      text NOT NULL,
  detail    jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX order_event_by_order ON demo.order_event (order_id, id);
