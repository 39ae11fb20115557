-- The tasks of an application that are not finished, counted at each create against the application's
-- limit of tasks in flight (TDP_TASKS_IN_FLIGHT_LIMIT). Partial: a finished task leaves the index, and
-- only a change of lifecycle status (a few in a task's life) touches it.
CREATE INDEX task_in_flight ON task (application_id) WHERE lifecycle_status IN ('PENDING', 'RUNNING');
