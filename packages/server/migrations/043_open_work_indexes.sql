-- Two reads whose cost grew with every task ever run, and grew faster while a long transaction kept
-- PostgreSQL from removing old row versions.
--
-- The tasks-in-flight quota counts an application's open tasks. It walked all of the application's
-- tasks. A task's row changes lifecycle status only when started_at or finished_at (both indexed) is
-- set too, so those updates already write every index: this one adds an entry per open task and
-- takes no in-place update away.
CREATE INDEX task_in_flight ON task (application_id) WHERE lifecycle_status IN ('PENDING', 'RUNNING');

-- When capacity frees, the requests put back for want of a worker become due at once. That update
-- scanned the whole table. Only requests waiting for their retry time are in this index; the update
-- makes them due, which takes them out of its range.
CREATE INDEX scheduling_request_deferred ON scheduling_request (available_at)
  WHERE status = 'PENDING' AND parked_key IS NULL AND reasons <> '[]'::jsonb;
