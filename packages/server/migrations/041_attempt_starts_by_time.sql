-- The queue page reads the attempts started in the last minutes (each tenant's and application's share,
-- every few seconds). Attempts are inserted in time order, so a BRIN index finds a recent span for the
-- cost of a few pages, and costs the hot insert next to nothing (a B-tree would add a probe per attempt).
CREATE INDEX attempt_created_brin ON attempt USING brin (created_at);
