-- Retention and archival (docs/retention.md). Finished tasks are archived in batches: a batch claims
-- its tasks here (one row per task, so no two sweepers take the same task), writes its files, and in
-- the transaction that deletes the tasks' rows checks the files against the rows and leaves a
-- tombstone per task. A sweeper that dies between the files and the delete leaves its batch here; the
-- next sweeper takes the batch over once its claim has expired and writes the same files again (they
-- are named by the batch), so a rerun neither loses nor duplicates a row.
CREATE TABLE retention_batch (
  id              uuid PRIMARY KEY,
  -- The archive day (UTC) the batch's files go under.
  archive_day     date NOT NULL,
  -- Renewed by each sweeper that takes the batch over; only the holder of the current claim deletes.
  claim_id        uuid NOT NULL,
  claimed_until   timestamptz NOT NULL,
  created_at      timestamptz NOT NULL
);

CREATE TABLE retention_batch_task (
  task_id   uuid PRIMARY KEY,
  batch_id  uuid NOT NULL REFERENCES retention_batch (id) ON DELETE CASCADE
);
CREATE INDEX retention_batch_task_by_batch ON retention_batch_task (batch_id);

-- What is left of an archived task: enough to answer 410 TASK_ARCHIVED to whoever could read it, and
-- to find its batch for `tdp archive restore --task <id>`.
CREATE TABLE archived_task (
  task_id         uuid PRIMARY KEY,
  tenant_id       uuid NOT NULL,
  application_id  uuid NOT NULL,
  owner_id        text,
  batch_id        uuid NOT NULL,
  archive_day     date NOT NULL,
  finished_at     timestamptz,
  archived_at     timestamptz NOT NULL
);

-- Each delete-only policy walks its table by block ranges (TID range scans, no index on the hot path);
-- the cursor row of a table is its claim: a sweeper locks it FOR UPDATE SKIP LOCKED for one range.
CREATE TABLE retention_cursor (
  table_name  text PRIMARY KEY,
  next_block  bigint NOT NULL DEFAULT 0,
  updated_at  timestamptz NOT NULL
);
