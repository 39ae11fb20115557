-- What an application's tokens show a user: that application's tasks (the default), or, when its
-- tenant names it, the user's tasks in every application of the tenant. Each change is audited.

ALTER TABLE application
  ADD COLUMN user_view text NOT NULL DEFAULT 'APPLICATION' CHECK (user_view IN ('APPLICATION', 'TENANT'));

-- Who changed which identity setting, when, from what to what.
CREATE TABLE identity_audit (
  id          uuid PRIMARY KEY,
  tenant_id   uuid NOT NULL REFERENCES tenant (id),
  action      text NOT NULL,
  actor       text NOT NULL,
  before      jsonb NOT NULL,
  after       jsonb NOT NULL,
  created_at  timestamptz NOT NULL
);
CREATE INDEX identity_audit_by_tenant ON identity_audit (tenant_id, created_at);
