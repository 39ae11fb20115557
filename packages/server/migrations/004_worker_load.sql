-- A worker's running attempts are counted from its open (unrevoked) attempts instead of a counter
-- that every dispatch and every finished step had to update: that row was hot, and a counter can drift.
CREATE INDEX attempt_open_by_worker ON attempt (worker_id) WHERE revoked_at IS NULL AND worker_id IS NOT NULL;
ALTER TABLE worker DROP COLUMN running_attempts;
