-- The idempotency key TDP sends with an output allocation (docs/resource-provider.md): a second ask with
-- the same key (a retry after a crash, a renewal) gets the same asset, never a second one.
ALTER TABLE demo.asset ADD COLUMN allocation_key text UNIQUE;
