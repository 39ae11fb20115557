-- A step row is rewritten by every event of its attempt, and every accepted event renews the attempt's
-- liveness, so each one moved heartbeat_deadline_at. That column was indexed (step_heartbeat_due), so no
-- step update could be HOT: each progress report wrote a new row version with an entry in all five
-- step indexes and left a dead tuple for every later read to step over (realtime benchmark: 32,000
-- updates, none in place; a 25-task step read took 2 ms). The health reconciler now finds its candidates
-- through an index on columns those updates leave alone (running, healthy, with a heartbeat timeout)
-- and checks the deadline on the rows, and a fill factor leaves room on each page for the new version.
DROP INDEX step_heartbeat_due;
CREATE INDEX step_heartbeat_watched ON step (task_id)
  WHERE status = 'RUNNING' AND health = 'HEALTHY' AND heartbeat_timeout_seconds IS NOT NULL;
ALTER TABLE step SET (fillfactor = 70);
