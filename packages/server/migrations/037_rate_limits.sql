-- Rate limits (docs/scheduling.md): a key's steps start no faster than `limit` per interval in each of
-- its pools. One token bucket per pool: up to `limit` tokens, refilled evenly by the time since
-- `refilled_at`. Placement takes a token under the row's lock (until commit), so two replicas never
-- both take a bucket's last token. A key's run-time limit and pause are its concurrency_key row.
CREATE TABLE rate_limit_bucket (
  tenant_id    uuid NOT NULL,
  name         text NOT NULL,
  value        text NOT NULL,
  tokens       double precision NOT NULL,
  refilled_at  timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, name, value)
);
