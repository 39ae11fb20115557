-- Operators with names (core/identity/operators.ts, docs/operators.md). Every operator power used to be
-- exercised with one shared admin token and audited as the literal "operator"; now each person has an
-- account, roles bound platform-wide or to named tenants, personal API tokens, sessions of their own,
-- and the audit records who acted.
CREATE TABLE operator (
  id             uuid PRIMARY KEY,
  -- Lower-cased: one account per address, however it is typed.
  email          text NOT NULL UNIQUE,
  display_name   text NOT NULL,
  status         text NOT NULL CHECK (status IN ('ACTIVE', 'DISABLED')),
  -- An argon2id PHC string; null for an operator who signs in through SSO only.
  password_hash  text,
  -- "<issuer> <sub>" of the SSO account this operator signed in with (set at the first SSO sign-in).
  sso_subject    text UNIQUE,
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL
);

-- A role, platform-wide (tenant_id null) or for one tenant. Bindings that came from SSO groups are
-- replaced at each SSO sign-in; those an admin set stay.
CREATE TABLE operator_role_binding (
  operator_id  uuid NOT NULL REFERENCES operator (id) ON DELETE CASCADE,
  role         text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
  tenant_id    uuid REFERENCES tenant (id),
  source       text NOT NULL CHECK (source IN ('manual', 'sso'))
);
CREATE UNIQUE INDEX operator_role_binding_once
  ON operator_role_binding (operator_id, role, coalesce(tenant_id, '00000000-0000-0000-0000-000000000000'), source);

-- Personal API tokens: only the secret's SHA-256 is kept; the token's role is the most it may do.
CREATE TABLE operator_token (
  -- The public part of the token (`tdpo_<id>_<secret>`).
  id            text PRIMARY KEY,
  operator_id   uuid NOT NULL REFERENCES operator (id) ON DELETE CASCADE,
  name          text NOT NULL,
  secret_hash   bytea NOT NULL,
  role          text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
  created_at    timestamptz NOT NULL,
  expires_at    timestamptz NOT NULL,
  revoked_at    timestamptz
);
CREATE INDEX operator_token_by_operator ON operator_token (operator_id);

-- A session now belongs to someone: the sessions opened with the shared token before named nobody.
DELETE FROM dashboard_session;
ALTER TABLE dashboard_session
  -- The session's public id, which the audit records (the cookie's secret never leaves the browser).
  ADD COLUMN id uuid NOT NULL UNIQUE,
  -- Null: a session opened with the bootstrap admin token.
  ADD COLUMN operator_id uuid REFERENCES operator (id) ON DELETE CASCADE,
  ADD COLUMN method text NOT NULL CHECK (method IN ('password', 'sso', 'bootstrap'));
CREATE INDEX dashboard_session_by_operator ON dashboard_session (operator_id);

-- Who acted (the operator, and the session or token), on which tenant and task, and what changed.
-- `actor` keeps the operator's name as it was then.
ALTER TABLE operator_audit
  ADD COLUMN operator_id  uuid,
  ADD COLUMN session_id   text,
  ADD COLUMN tenant_id    uuid,
  ADD COLUMN task_id      uuid,
  ADD COLUMN before       jsonb,
  ADD COLUMN after        jsonb;
CREATE INDEX operator_audit_by_operator ON operator_audit (operator_id, created_at);
CREATE INDEX operator_audit_by_tenant ON operator_audit (tenant_id, created_at);
CREATE INDEX operator_audit_by_task ON operator_audit (task_id, created_at);

-- A bulk job run by a tenant-scoped operator touches only their tenants (null: every tenant).
ALTER TABLE bulk_job ADD COLUMN tenant_ids uuid[];
