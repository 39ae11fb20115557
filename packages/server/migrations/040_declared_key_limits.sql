-- A key's declared limit belongs to its name in the tenant: the latest published definition declaring
-- it sets it (publish writes it in the same statement as the definition), and every step of the key
-- counts against it, whichever definition its task was created from. A limit set at run time ("limit")
-- still takes its place.
ALTER TABLE concurrency_key
  ADD COLUMN declared_limit integer CHECK (declared_limit >= 1),
  ADD COLUMN declared_interval_ms integer;

-- The keys already declared, by their latest definition.
INSERT INTO concurrency_key (tenant_id, name, declared_limit, declared_interval_ms, updated_at)
SELECT DISTINCT ON (d.tenant_id, k->>'key') d.tenant_id, k->>'key', (k->>'limit')::int,
       (k->>'intervalMs')::int, d.published_at
FROM workflow_definition d
CROSS JOIN jsonb_array_elements(d.steps) AS s
CROSS JOIN jsonb_array_elements(coalesce(s->'concurrency', '[]'::jsonb) || coalesce(s->'rateLimits', '[]'::jsonb)) AS k
ORDER BY d.tenant_id, k->>'key', d.published_at DESC
ON CONFLICT (tenant_id, name) DO UPDATE
  SET declared_limit = excluded.declared_limit, declared_interval_ms = excluded.declared_interval_ms;
