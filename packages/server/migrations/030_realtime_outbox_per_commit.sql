-- One realtime_outbox row per commit, holding that commit's messages in commit order (it was one row per
-- message). With a durable gateway (Centrifugo, Redis) a batch of 25 progress reports wrote 75 rows with
-- five index entries each, and rewrote every one of them as PUBLISHED in a non-HOT update once the
-- gateway had it: per change PostgreSQL did 2.3 times the work of the in-process gateway's run. Now such a
-- commit writes one row and marks one. A message is retried or given up with its row; the relay moves the
-- messages a gateway refused for good to a DEAD row of their own, so a row's messages share one fate.
--
-- The rows waiting to be published (and the DEAD ones) move over as rows of one message each; the
-- published history is not kept (it was only the trail the retention sweep deletes after its window).
CREATE TABLE realtime_outbox_per_commit (
  id                 uuid PRIMARY KEY,
  -- [{id, tenant_id, aggregate_type, aggregate_id, aggregate_version, channel, projection, payload}, …]
  messages           jsonb NOT NULL CHECK (jsonb_typeof(messages) = 'array'),
  status             text NOT NULL DEFAULT 'PENDING'
                     CHECK (status IN ('PENDING', 'PUBLISHING', 'PUBLISHED', 'FAILED', 'DEAD')),
  attempts           integer NOT NULL DEFAULT 0,
  available_at       timestamptz NOT NULL,
  claim_id           uuid,
  claim_expires_at   timestamptz,
  last_error         text,
  created_at         timestamptz NOT NULL,
  published_at       timestamptz,
  written_by         xid8 NOT NULL DEFAULT pg_current_xact_id()
);

INSERT INTO realtime_outbox_per_commit (id, messages, status, attempts, available_at, last_error, created_at,
                                        written_by)
SELECT id,
       jsonb_build_array(jsonb_build_object(
         'id', id, 'tenant_id', tenant_id, 'aggregate_type', aggregate_type, 'aggregate_id', aggregate_id,
         'aggregate_version', aggregate_version::text, 'channel', channel, 'projection', projection,
         'payload', payload)),
       CASE status WHEN 'PUBLISHING' THEN 'PENDING' ELSE status END, attempts, available_at, last_error,
       created_at, '0'
FROM realtime_outbox WHERE status <> 'PUBLISHED';

DROP TABLE realtime_outbox;
ALTER TABLE realtime_outbox_per_commit RENAME TO realtime_outbox;
ALTER TABLE realtime_outbox RENAME CONSTRAINT realtime_outbox_per_commit_pkey TO realtime_outbox_pkey;
CREATE INDEX realtime_outbox_due ON realtime_outbox (available_at) WHERE status IN ('PENDING', 'FAILED');
CREATE INDEX realtime_outbox_claimed ON realtime_outbox (claim_expires_at) WHERE status = 'PUBLISHING';
CREATE INDEX realtime_outbox_dead ON realtime_outbox (created_at) WHERE status = 'DEAD';
CREATE INDEX realtime_outbox_by_writer ON realtime_outbox (written_by);

-- The messages one per row, with the state of the row that holds them: for operators and tests.
CREATE VIEW realtime_message AS
SELECT m.id, o.id AS outbox_id, m.position, o.status, o.attempts, o.last_error, o.created_at, o.published_at,
       m.tenant_id, m.aggregate_type, m.aggregate_id, m.aggregate_version, m.channel, m.projection, m.payload
FROM realtime_outbox o
CROSS JOIN LATERAL ROWS FROM (
  jsonb_to_recordset(o.messages) AS (id uuid, tenant_id uuid, aggregate_type text, aggregate_id uuid,
                                     aggregate_version bigint, channel text, projection text, payload jsonb)
) WITH ORDINALITY AS m(id, tenant_id, aggregate_type, aggregate_id, aggregate_version, channel, projection,
                       payload, position);
