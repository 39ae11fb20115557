-- With Centrifugo serving the browsers, each server replica feeds its own native task streams
-- (GET /v1/me/task-stream) from the committed realtime rows. The id of the transaction that wrote a row
-- lets a replica read exactly what committed since its last read, by snapshot: a row is new when its
-- transaction was not yet visible in the previous snapshot and is in the current one, however long
-- that transaction ran. (Rows written before this migration get 0: already old to every reader.)
ALTER TABLE realtime_outbox ADD COLUMN written_by xid8 NOT NULL DEFAULT '0';
ALTER TABLE realtime_outbox ALTER COLUMN written_by SET DEFAULT pg_current_xact_id();
CREATE INDEX realtime_outbox_by_writer ON realtime_outbox (written_by);

-- The detail limit with Centrifugo (docs/realtime.md): each subscription token for a task's detail
-- channel holds a lease for its connection (the SDK's client id) and channel until the token expires;
-- a refresh renews it. TDP refuses a connection's 21st live lease, after releasing those whose channel
-- Centrifugo's presence no longer shows the connection in (an unsubscribed detail), if taken a while
-- ago (`renewed_at`: a token just minted may not be used yet). Shared by every replica.
CREATE TABLE detail_subscription_lease (
  client_id   text NOT NULL,
  channel     text NOT NULL,
  expires_at  timestamptz NOT NULL,
  renewed_at  timestamptz NOT NULL,
  PRIMARY KEY (client_id, channel)
);
CREATE INDEX detail_subscription_lease_expired ON detail_subscription_lease (expires_at);

-- The task streams open on every replica, so that a watch-set PUT reaching any replica finds its stream:
-- the replica that checked it writes the tasks here and wakes the one holding the stream (NOTIFY, a
-- hint only: the row is what it applies). The holder renews `alive_until` while the stream is open.
CREATE TABLE task_stream_session (
  session_id        uuid PRIMARY KEY,
  tenant_id         uuid NOT NULL,
  application_id    uuid NOT NULL,
  user_id           text NOT NULL,
  task_ids          uuid[] NOT NULL DEFAULT '{}',
  watch_expires_at  timestamptz,
  alive_until       timestamptz NOT NULL
);
CREATE INDEX task_stream_session_gone ON task_stream_session (alive_until);
