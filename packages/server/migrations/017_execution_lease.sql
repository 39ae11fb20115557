-- Execution leases apart from the wide step row. A heartbeat renewed its attempt's
-- lease by rewriting the step row (JSON progress, state data, errors and all), a new row version and
-- WAL for every beat. The lease is now a narrow row of its own, one per RUNNING current step attempt:
-- the fact path creates it when the attempt starts, mirrors its health, and deletes it when the attempt
-- stops running; heartbeats only update heartbeat_seq and last_heartbeat_at here. No index covers
-- those two columns and the fill factor leaves room on each page, so every renewal is a HOT update.
-- The step row keeps the authoritative status and health; readers of a step take the later of its own
-- heartbeat columns and its lease's. The health reconciler finds overdue attempts here: the table holds
-- only running attempts, so it stays small however many tasks have finished. The reasoning in full:
-- docs/design/execution-leases.md.
CREATE TABLE execution_lease (
  attempt_id                uuid PRIMARY KEY,
  task_id                   uuid NOT NULL,
  heartbeat_seq             bigint NOT NULL DEFAULT 0,
  last_heartbeat_at         timestamptz,
  health                    text NOT NULL,
  stale_since               timestamptz,
  heartbeat_timeout_seconds integer,
  -- When the attempt started running: its deadline runs from here until a first sign of life.
  leased_at                 timestamptz NOT NULL
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05);

INSERT INTO execution_lease (attempt_id, task_id, heartbeat_seq, last_heartbeat_at, health, stale_since,
                             heartbeat_timeout_seconds, leased_at)
SELECT attempt_id, task_id, last_heartbeat_seq, last_heartbeat_at, health, stale_since,
       heartbeat_timeout_seconds, coalesce(started_at, updated_at)
FROM step
WHERE status = 'RUNNING' AND current AND attempt_id IS NOT NULL;

-- The reconciler's old way to its candidates (migration 007): it reads the lease table now.
DROP INDEX step_heartbeat_watched;
