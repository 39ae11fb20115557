-- ANALYZE of the hot tables ran every few seconds under load (a new database churns its tables past the
-- analyze threshold within seconds), and most of its time went to columns no query ever filters,
-- sorts or joins on: JSON payloads, sealed handles, messages, hashes. Their statistics are never used
-- by a plan, so they are no longer collected; every column a WHERE clause names keeps its statistics.
ALTER TABLE task
  ALTER COLUMN input SET STATISTICS 0,
  ALTER COLUMN dynamic_policy SET STATISTICS 0,
  ALTER COLUMN failure SET STATISTICS 0;
ALTER TABLE execution
  ALTER COLUMN snapshot SET STATISTICS 0,
  ALTER COLUMN result SET STATISTICS 0;
ALTER TABLE step
  ALTER COLUMN progress SET STATISTICS 0,
  ALTER COLUMN source_seqs SET STATISTICS 0,
  ALTER COLUMN state_data SET STATISTICS 0,
  ALTER COLUMN error SET STATISTICS 0;
ALTER TABLE attempt ALTER COLUMN handle_sealed SET STATISTICS 0;
ALTER TABLE workflow ALTER COLUMN task_counts SET STATISTICS 0;
ALTER TABLE task_event ALTER COLUMN payload SET STATISTICS 0;
ALTER TABLE event_dedup
  ALTER COLUMN payload_hash SET STATISTICS 0,
  ALTER COLUMN result SET STATISTICS 0;
ALTER TABLE idempotency
  ALTER COLUMN request_hash SET STATISTICS 0,
  ALTER COLUMN response_body SET STATISTICS 0;
ALTER TABLE timeline
  ALTER COLUMN message SET STATISTICS 0,
  ALTER COLUMN data SET STATISTICS 0;
ALTER TABLE worker_command ALTER COLUMN payload SET STATISTICS 0;
ALTER TABLE scheduling_request ALTER COLUMN reasons SET STATISTICS 0;
ALTER TABLE timer ALTER COLUMN payload SET STATISTICS 0;
ALTER TABLE callback_delivery ALTER COLUMN payload SET STATISTICS 0;
ALTER TABLE realtime_outbox ALTER COLUMN payload SET STATISTICS 0;
ALTER TABLE outbox_event ALTER COLUMN payload SET STATISTICS 0;
