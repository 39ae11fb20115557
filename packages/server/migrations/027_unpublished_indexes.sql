-- Indexes for the gauges that count what is waiting (backlogs, the queue), not what is history.
--
-- The backlog gauges, the dashboard's charts and the relays' oldest-row reads ask each claimable table
-- for its rows not yet published (`status <> 'PUBLISHED'`, or PENDING/PUBLISHING/FAILED), several times a
-- second. The due and claimed indexes of migration 002 leave out DEAD rows, so those reads scanned the
-- whole table: published rows are kept for days (docs/retention.md), and on a database of a million
-- finished tasks each scan read a million rows (`npm run bench -- growth`). These partial indexes hold
-- only the unpublished rows, so the reads cost what the backlog is, not what the history is.
CREATE INDEX outbox_event_unpublished ON outbox_event (status, created_at) WHERE status <> 'PUBLISHED';
CREATE INDEX realtime_outbox_unpublished ON realtime_outbox (status, created_at) WHERE status <> 'PUBLISHED';
CREATE INDEX callback_delivery_unpublished ON callback_delivery (status, created_at) WHERE status <> 'PUBLISHED';

-- The queue-depth gauge counts the steps waiting to run; the step table holds every step ever run.
CREATE INDEX step_queued ON step (status) WHERE status IN ('READY', 'QUEUED');
