-- Fair share (docs/scheduling.md). Waiting steps used to be placed by priority, then age: one tenant's
-- backfill filled every worker while every other tenant waited. Now the scheduler places by start-time
-- fair queuing on tags, between tenants, then between a tenant's applications, then by priority aged by
-- waiting; and a step may hold concurrency keys that limit how many of its kind run at once.

-- The tenant and application a request is fair between (set for open requests below; the closed ones
-- never need it). Tags are set by the scheduler when it first sees a request (null: not yet), so a
-- create never waits on another create of its tenant to be charged its place in line.
ALTER TABLE scheduling_request
  ADD COLUMN tenant_id        uuid,
  ADD COLUMN application_id   uuid,
  ADD COLUMN tenant_tag       double precision,
  ADD COLUMN application_tag  double precision,
  -- When the request counts as having arrived, within its application: created_at moved earlier by
  -- its priority times the aging step. Fixed once set: the older it gets, the more it beats newer work.
  ADD COLUMN order_at         timestamptz,
  -- The concurrency key pool it waits for a slot of (parked: not due until a slot frees), and the
  -- limit that held it (the recheck lets it in once the pool has room under that limit).
  ADD COLUMN parked_key       text,
  ADD COLUMN parked_value     text,
  ADD COLUMN parked_limit     integer;

UPDATE scheduling_request r SET tenant_id = t.tenant_id, application_id = t.application_id
  FROM task t WHERE t.id = r.task_id AND r.status = 'PENDING';

DROP INDEX scheduling_request_due;
-- The scheduler's three looks: the lowest tenant tags, a tenant's lowest application tags, an
-- application's first by order; parked requests are in none of them.
CREATE INDEX scheduling_request_turns ON scheduling_request (tenant_tag)
  WHERE status = 'PENDING' AND parked_key IS NULL AND tenant_tag IS NOT NULL;
CREATE INDEX scheduling_request_tenant_turns ON scheduling_request (tenant_id, application_tag)
  WHERE status = 'PENDING' AND parked_key IS NULL AND tenant_tag IS NOT NULL;
CREATE INDEX scheduling_request_application_order ON scheduling_request (application_id, order_at)
  WHERE status = 'PENDING' AND parked_key IS NULL AND tenant_tag IS NOT NULL;
-- With every worker busy, a round looks only at requests no round has tried (to give them reasons).
CREATE INDEX scheduling_request_untried ON scheduling_request (tenant_tag)
  WHERE status = 'PENDING' AND parked_key IS NULL AND tenant_tag IS NOT NULL AND reasons = '[]'::jsonb;
CREATE INDEX scheduling_request_arrivals ON scheduling_request (created_at)
  WHERE status = 'PENDING' AND tenant_tag IS NULL;
CREATE INDEX scheduling_request_parked ON scheduling_request (tenant_id, parked_key, parked_value, order_at)
  WHERE status = 'PENDING' AND parked_key IS NOT NULL;

-- Each flow's place in line: 'platform' (served_tag: the virtual time between tenants),
-- 'tenant:<id>' (last_tag: its last tenant tag; served_tag: the virtual time between its applications),
-- 'application:<id>' (last_tag: its last application tag).
CREATE TABLE scheduling_flow (
  flow        text PRIMARY KEY,
  last_tag    double precision NOT NULL DEFAULT 0,
  served_tag  double precision NOT NULL DEFAULT 0
);

-- Operators' weights: a tenant (or application) of weight 2 gets twice the share of one of weight 1.
CREATE TABLE scheduling_weight (
  scope       text NOT NULL CHECK (scope IN ('tenant', 'application')),
  id          uuid NOT NULL,
  weight      double precision NOT NULL CHECK (weight > 0 AND weight <= 1000),
  updated_at  timestamptz NOT NULL,
  PRIMARY KEY (scope, id)
);

-- A concurrency key's limit set at run time (it takes the place of the limit the definitions declare),
-- and whether an operator paused it.
CREATE TABLE concurrency_key (
  tenant_id   uuid NOT NULL REFERENCES tenant (id),
  name        text NOT NULL,
  "limit"     integer CHECK ("limit" >= 1),
  paused      boolean NOT NULL DEFAULT false,
  updated_at  timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, name)
);

-- A slot a placed step holds until it stops (written with its STEP_DISPATCHED, deleted with the fact
-- that ends it, which lets the next parked step of the pool in).
CREATE TABLE concurrency_hold (
  step_id     uuid NOT NULL,
  name        text NOT NULL,
  tenant_id   uuid NOT NULL,
  value       text NOT NULL,
  task_id     uuid NOT NULL,
  created_at  timestamptz NOT NULL,
  PRIMARY KEY (step_id, name)
);
CREATE INDEX concurrency_hold_pool ON concurrency_hold (tenant_id, name, value);
