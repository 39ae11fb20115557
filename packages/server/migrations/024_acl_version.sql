-- Each grant or revoke of a principal's access to a task gets the next ACL version of that row. The
-- summary a grant announces and the tombstone a revoke announces carry it, so a client store orders a
-- re-grant after the revoke it undoes even when the task's own version has not moved between them.
ALTER TABLE task_acl ADD COLUMN acl_version bigint NOT NULL DEFAULT 0;
