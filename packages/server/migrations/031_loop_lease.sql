-- Work one replica does for all of them, a round at a time: the Temporal engine's sweep
-- (adapters/temporal/workflowSweep.ts). A round runs in the replica that holds the lease, which is its
-- own for an interval and then anyone's; the row carries the walk's position, so the next holder goes on
-- from where the last one stopped.
CREATE TABLE loop_lease (
  name        text PRIMARY KEY,
  holder      text NOT NULL,
  held_until  timestamptz NOT NULL,
  position    text NOT NULL DEFAULT ''
);
