-- Broadcasts (docs/realtime.md): a notice to a tenant's people or to everyone, written with its
-- audit record and published by the relay like a task projection. A system broadcast has no tenant.
ALTER TABLE realtime_outbox DROP CONSTRAINT realtime_outbox_aggregate_type_check;
ALTER TABLE realtime_outbox ADD CONSTRAINT realtime_outbox_aggregate_type_check
  CHECK (aggregate_type IN ('TASK', 'WORKFLOW', 'BROADCAST'));
ALTER TABLE realtime_outbox ALTER COLUMN tenant_id DROP NOT NULL;
