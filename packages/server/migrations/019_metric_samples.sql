-- The dashboard's charts. Counts per minute (tasks created, finished, submit→start) are read from the
-- task table over time buckets; these indexes keep a day's window off a scan of every task ever kept.
-- started_at and finished_at change once in a task's life, so the partial indexes cost one update each.
CREATE INDEX task_by_created_at ON task (created_at);
CREATE INDEX task_by_started_at ON task (started_at) WHERE started_at IS NOT NULL;
CREATE INDEX task_by_finished_at ON task (finished_at) WHERE finished_at IS NOT NULL;

-- Gauges no table keeps a history of (backlogs, queue depth, DEAD and STALE counts), sampled once a
-- minute: the minute is the key, so whichever replica samples first writes it and the others' inserts
-- do nothing. The sampler deletes rows older than its retention (two days by default).
CREATE TABLE metric_sample (
  minute                   timestamptz PRIMARY KEY,
  sampled_at               timestamptz NOT NULL,
  -- Steps ready to run and not started (READY or QUEUED), and those of them no worker can take now.
  queue_depth              integer NOT NULL,
  waiting_for_worker       integer NOT NULL,
  stale_steps              integer NOT NULL,
  outbox_backlog           integer NOT NULL,
  outbox_oldest_age_ms     bigint,
  outbox_dead              integer NOT NULL,
  relay_backlog            integer NOT NULL,
  relay_oldest_age_ms      bigint,
  relay_dead               integer NOT NULL,
  callback_backlog         integer NOT NULL,
  callback_oldest_age_ms   bigint,
  callback_dead            integer NOT NULL
);
