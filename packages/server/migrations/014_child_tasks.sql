-- Child tasks (a step of kind "task"): the child records the parent task and the parent's step that
-- started it (each keeps its own versions and end). The index finds a task's children.
ALTER TABLE task
  ADD COLUMN parent_task_id uuid,
  ADD COLUMN parent_step_id uuid;
CREATE INDEX task_by_parent ON task (parent_task_id, created_at, id) WHERE parent_task_id IS NOT NULL;
