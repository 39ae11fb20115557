-- Debounce and singleton keys of task creation (docs/scheduling.md). One row per application and key:
-- the task that holds the key now. A create with the key takes a transaction-scoped advisory lock on it
-- before it reads its row, so concurrent creates with one key take turns and leave exactly one holder.
-- Keys belong to an application: a key is one application's name for its own submissions, and a debounce
-- cancels the task it replaces, which only that application may do.
CREATE TABLE task_key_slot (
  application_id  uuid        NOT NULL,
  -- 'debounce' (the task waiting out its window) or 'singleton' (the task that may run alone).
  kind            text        NOT NULL CHECK (kind IN ('debounce', 'singleton')),
  key             text        NOT NULL,
  task_id         uuid        NOT NULL,
  -- A debounce: when the holder's window ends (its first steps placeable). Null for a singleton, whose
  -- holder keeps the key until its task is finished (read from the task, so nothing must release it).
  window_ends_at  timestamptz,
  updated_at      timestamptz NOT NULL,
  PRIMARY KEY (application_id, kind, key)
);
