-- Grants that last as long as the work. A grant row is now written before the
-- resource provider is asked (state RESERVED, no answer yet) and completed with its answer (ISSUED), so a
-- request retried after a crash finds its reservation and asks the provider again with the same
-- allocation key instead of allocating a second output. A grant is renewed in place: a new URL and expiry
-- from the provider for the same allocation, the key of the renewal request kept for its replay.
ALTER TABLE access_grant
  ADD COLUMN state text NOT NULL DEFAULT 'ISSUED' CHECK (state IN ('RESERVED', 'ISSUED')),
  ADD COLUMN request jsonb,
  ADD COLUMN issued_at timestamptz,
  ADD COLUMN renewal_key text,
  ADD COLUMN renewals integer NOT NULL DEFAULT 0,
  ALTER COLUMN resource_ref DROP NOT NULL,
  ALTER COLUMN answer_sealed DROP NOT NULL,
  ALTER COLUMN expires_at DROP NOT NULL;

UPDATE access_grant SET issued_at = created_at;

-- An issued grant has its answer; a reservation has none yet.
ALTER TABLE access_grant ADD CONSTRAINT access_grant_issued_has_answer
  CHECK (state = 'RESERVED' OR (answer_sealed IS NOT NULL AND resource_ref IS NOT NULL
                                AND expires_at IS NOT NULL AND issued_at IS NOT NULL));
