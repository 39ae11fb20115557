import type { GrantStore, IssuedAnswer, ProviderAsk, StoredGrant } from '../../../core/grants/grants.ts';
import type { Sql } from './database.ts';

interface GrantRow {
  id: string;
  attempt_id: string;
  lease_version: number;
  application_id: string;
  purpose: StoredGrant['purpose'];
  state: StoredGrant['state'];
  resource_ref: string | null;
  idempotency_key: string;
  request_hash: string;
  request: ProviderAsk | null;
  answer_sealed: string | null;
  expires_at: Date | null;
  issued_at: Date | null;
  renewal_key: string | null;
  created_at: Date;
}

const toGrant = (row: GrantRow): StoredGrant => ({
  id: row.id,
  attemptId: row.attempt_id,
  leaseVersion: row.lease_version,
  applicationId: row.application_id,
  purpose: row.purpose,
  state: row.state,
  idempotencyKey: row.idempotency_key,
  requestHash: row.request_hash,
  ask: row.request,
  resourceRef: row.resource_ref,
  answerSealed: row.answer_sealed,
  expiresAt: row.expires_at,
  issuedAt: row.issued_at,
  renewalKey: row.renewal_key,
  createdAt: row.created_at,
});

export class PostgresGrantStore implements GrantStore {
  constructor(private readonly sql: Sql) {}

  async find(attemptId: string, idempotencyKey: string): Promise<StoredGrant | null> {
    const [row] = await this.sql<GrantRow[]>`
      SELECT * FROM access_grant WHERE attempt_id = ${attemptId} AND idempotency_key = ${idempotencyKey}`;
    return row ? toGrant(row) : null;
  }

  async findById(attemptId: string, grantId: string): Promise<StoredGrant | null> {
    const [row] = await this.sql<GrantRow[]>`
      SELECT * FROM access_grant WHERE id = ${grantId} AND attempt_id = ${attemptId}`;
    return row ? toGrant(row) : null;
  }

  async reserve(g: StoredGrant): Promise<boolean> {
    const rows = await this.sql`
      INSERT INTO access_grant (id, attempt_id, lease_version, application_id, purpose, state, idempotency_key,
                                request_hash, request, created_at)
      VALUES (${g.id}, ${g.attemptId}, ${g.leaseVersion}, ${g.applicationId}, ${g.purpose}, 'RESERVED',
              ${g.idempotencyKey}, ${g.requestHash}, ${this.sql.json(g.ask as never)}, ${g.createdAt})
      ON CONFLICT (attempt_id, idempotency_key) DO NOTHING
      RETURNING id`;
    return rows.length > 0;
  }

  async issue(grantId: string, a: IssuedAnswer): Promise<boolean> {
    const rows = await this.sql`
      UPDATE access_grant
      SET state = 'ISSUED', resource_ref = ${a.resourceRef}, answer_sealed = ${a.answerSealed},
          expires_at = ${a.expiresAt}, issued_at = ${a.issuedAt}
      WHERE id = ${grantId} AND state = 'RESERVED'
      RETURNING id`;
    return rows.length > 0;
  }

  async renew(grantId: string, a: IssuedAnswer, renewalKey: string | null): Promise<void> {
    await this.sql`
      UPDATE access_grant
      SET answer_sealed = ${a.answerSealed}, expires_at = ${a.expiresAt}, issued_at = ${a.issuedAt},
          renewal_key = coalesce(${renewalKey}, renewal_key), renewals = renewals + 1
      WHERE id = ${grantId} AND state = 'ISSUED'`;
  }

  async dropReservation(grantId: string): Promise<void> {
    await this.sql`DELETE FROM access_grant WHERE id = ${grantId} AND state = 'RESERVED'`;
  }
}
