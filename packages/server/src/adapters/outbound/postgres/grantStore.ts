import type { GrantStore, StoredGrant } from '../../../core/grants/grants.ts';
import type { Sql } from './database.ts';

interface GrantRow {
  id: string;
  attempt_id: string;
  lease_version: number;
  application_id: string;
  purpose: StoredGrant['purpose'];
  resource_ref: string;
  idempotency_key: string;
  request_hash: string;
  answer_sealed: string;
  expires_at: Date;
  created_at: Date;
}

export class PostgresGrantStore implements GrantStore {
  constructor(private readonly sql: Sql) {}

  async find(attemptId: string, idempotencyKey: string): Promise<StoredGrant | null> {
    const [row] = await this.sql<GrantRow[]>`
      SELECT * FROM access_grant WHERE attempt_id = ${attemptId} AND idempotency_key = ${idempotencyKey}`;
    return row
      ? {
          id: row.id,
          attemptId: row.attempt_id,
          leaseVersion: row.lease_version,
          applicationId: row.application_id,
          purpose: row.purpose,
          resourceRef: row.resource_ref,
          idempotencyKey: row.idempotency_key,
          requestHash: row.request_hash,
          answerSealed: row.answer_sealed,
          expiresAt: row.expires_at,
          createdAt: row.created_at,
        }
      : null;
  }

  async insert(g: StoredGrant): Promise<boolean> {
    const rows = await this.sql`
      INSERT INTO access_grant (id, attempt_id, lease_version, application_id, purpose, resource_ref, idempotency_key,
                                request_hash, answer_sealed, expires_at, created_at)
      VALUES (${g.id}, ${g.attemptId}, ${g.leaseVersion}, ${g.applicationId}, ${g.purpose}, ${g.resourceRef},
              ${g.idempotencyKey}, ${g.requestHash}, ${g.answerSealed}, ${g.expiresAt}, ${g.createdAt})
      ON CONFLICT (attempt_id, idempotency_key) DO NOTHING
      RETURNING id`;
    return rows.length > 0;
  }
}
