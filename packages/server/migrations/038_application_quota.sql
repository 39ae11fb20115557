-- An application's own limit of unfinished tasks (docs/scheduling.md#quotas), set at run time by an
-- operator of its tenant (audited as APPLICATION_QUOTA_CHANGED). No row: the platform's setting
-- (TDP_TASKS_IN_FLIGHT_LIMIT) applies. Creates read it with their in-flight count, in the same query.
CREATE TABLE application_quota (
  application_id   uuid PRIMARY KEY REFERENCES application (id),
  tasks_in_flight  integer NOT NULL CHECK (tasks_in_flight >= 1),
  updated_at       timestamptz NOT NULL
);
