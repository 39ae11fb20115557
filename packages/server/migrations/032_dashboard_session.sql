-- The operators' dashboard sessions (core/identity/operatorSessions.ts). The cookie holds a random id;
-- only its SHA-256 is stored here, so a copy of this table opens no session. Logging out deletes the
-- row; a session idle for longer than the idle timeout, or past its absolute expiry, is refused, and
-- such rows are deleted at the next login.
CREATE TABLE dashboard_session (
  id_hash       bytea PRIMARY KEY,
  created_at    timestamptz NOT NULL,
  last_seen_at  timestamptz NOT NULL,
  expires_at    timestamptz NOT NULL
);
