-- Access grants (docs/resource-provider.md): short-lived URLs a resource provider issued for one attempt and
-- one lease version, to download an input or upload an output. Bytes never pass through TDP; the URL and
-- its headers are stored sealed. Output allocations are grants too (`purpose` = ARTIFACT): one table, one
-- idempotency rule, rather than a second table for allocations.
CREATE TABLE access_grant (
  id               uuid PRIMARY KEY,
  attempt_id       uuid NOT NULL REFERENCES attempt (id),
  lease_version    integer NOT NULL,
  application_id   uuid NOT NULL REFERENCES application (id),
  purpose          text NOT NULL CHECK (purpose IN ('DOWNLOAD', 'UPLOAD', 'ARTIFACT')),
  resource_ref     text NOT NULL,
  idempotency_key  text NOT NULL,
  request_hash     text NOT NULL,
  answer_sealed    text NOT NULL,
  expires_at       timestamptz NOT NULL,
  created_at       timestamptz NOT NULL,
  UNIQUE (attempt_id, idempotency_key)
);
