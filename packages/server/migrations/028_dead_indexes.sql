-- The backlog reads go by status group, each through a partial index that holds only that group.
--
-- Migration 027 gave the backlog reads one index of every row not yet published. Every insert into the
-- outbox, realtime and callback tables, and every claim, paid an entry in it: the write path's cost, for
-- a read made a few times a second. The due (PENDING, FAILED) and claimed (PUBLISHING) indexes already
-- hold those groups, so only the DEAD rows lacked an index. These indexes hold the DEAD rows alone (there
-- are few, and a requeue removes them). The reads count each group through its own index
-- (`ClaimableRows.backlog`).
DROP INDEX IF EXISTS outbox_event_unpublished;
DROP INDEX IF EXISTS realtime_outbox_unpublished;
DROP INDEX IF EXISTS callback_delivery_unpublished;
CREATE INDEX IF NOT EXISTS outbox_event_dead ON outbox_event (created_at) WHERE status = 'DEAD';
CREATE INDEX IF NOT EXISTS realtime_outbox_dead ON realtime_outbox (created_at) WHERE status = 'DEAD';
CREATE INDEX IF NOT EXISTS callback_delivery_dead ON callback_delivery (created_at) WHERE status = 'DEAD';
