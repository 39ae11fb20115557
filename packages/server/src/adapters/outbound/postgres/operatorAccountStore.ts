/**
 * Operator accounts, their role bindings and personal tokens (migration 033), each change written with
 * its audit record in one transaction.
 */
import { isUuid } from '@tdp/protocol';
import type { OperatorAuditRecord } from '../../../core/facts/records.ts';
import type { OperatorRole, RoleBinding } from '../../../core/identity/operatorAccess.ts';
import type {
  BindingSource,
  OperatorChanges,
  OperatorRecord,
  OperatorStatus,
  OperatorStore,
} from '../../../core/identity/operators.ts';
import type { OperatorTokenRecord, OperatorTokenStore } from '../../../core/identity/operatorTokens.ts';
import { isUniqueViolation, type Queryable, type Sql, transaction } from './database.ts';
import { insertAudit } from './operatorStore.ts';

interface OperatorRow {
  id: string;
  email: string;
  display_name: string;
  status: OperatorStatus;
  password_hash: string | null;
  sso_subject: string | null;
  roles: { role: OperatorRole; tenantId: string | null; source: BindingSource }[];
  created_at: Date;
  updated_at: Date;
}

const toOperator = (r: OperatorRow): OperatorRecord => ({
  id: r.id,
  email: r.email,
  displayName: r.display_name,
  status: r.status,
  passwordHash: r.password_hash,
  ssoSubject: r.sso_subject,
  roles: r.roles,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/** An account with its bindings, in one row. */
const selectOperators = `
  SELECT o.id, o.email, o.display_name, o.status, o.password_hash, o.sso_subject, o.created_at, o.updated_at,
         coalesce((SELECT json_agg(json_build_object('role', b.role, 'tenantId', b.tenant_id, 'source', b.source)
                                   ORDER BY b.source, b.tenant_id NULLS FIRST, b.role)
                   FROM operator_role_binding b WHERE b.operator_id = o.id), '[]') AS roles
  FROM operator o`;

async function insertBindings(
  tx: Queryable,
  operatorId: string,
  roles: RoleBinding[],
  source: BindingSource,
): Promise<void> {
  // Deduplicated: the same role twice for the same scope is one binding.
  const unique = [...new Map(roles.map((r) => [`${r.role} ${r.tenantId}`, r])).values()];
  if (unique.length === 0) return;
  await tx`
    INSERT INTO operator_role_binding (operator_id, role, tenant_id, source)
    SELECT ${operatorId}, role, tenant_id, ${source}
    FROM unnest(${unique.map((r) => r.role)}::text[], ${unique.map((r) => r.tenantId)}::uuid[]) AS b(role, tenant_id)`;
}

interface TokenRow {
  id: string;
  operator_id: string;
  name: string;
  secret_hash: Buffer;
  role: OperatorRole;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
}

/** A token's columns beside its operator's (find's join). */
interface TokenColumns {
  token_id: string;
  token_name: string;
  secret_hash: Buffer;
  token_role: OperatorRole;
  token_created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
}

const toToken = (r: TokenRow): OperatorTokenRecord => ({
  id: r.id,
  operatorId: r.operator_id,
  name: r.name,
  secretHash: r.secret_hash,
  role: r.role,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  revokedAt: r.revoked_at,
});

export class PostgresOperatorAccountStore implements OperatorStore {
  constructor(private readonly sql: Sql) {}

  async create(o: OperatorRecord, audit: OperatorAuditRecord): Promise<'created' | 'emailTaken'> {
    try {
      await transaction(this.sql, async (tx) => {
        await tx`
          INSERT INTO operator (id, email, display_name, status, password_hash, sso_subject, created_at, updated_at)
          VALUES (${o.id}, ${o.email}, ${o.displayName}, ${o.status}, ${o.passwordHash}, ${o.ssoSubject},
                  ${o.createdAt}, ${o.updatedAt})`;
        await insertBindings(tx, o.id, o.roles, 'manual');
        await insertAudit(tx, audit);
      });
      return 'created';
    } catch (error) {
      if (isUniqueViolation(error)) return 'emailTaken';
      throw error;
    }
  }

  private async one(where: string, value: string): Promise<OperatorRecord | null> {
    const [row] = await this.sql.unsafe<OperatorRow[]>(`${selectOperators} WHERE ${where} = $1`, [value]);
    return row ? toOperator(row) : null;
  }

  get(id: string) {
    return isUuid(id) ? this.one('o.id', id) : Promise.resolve(null);
  }

  byEmail(email: string) {
    return this.one('o.email', email);
  }

  bySsoSubject(subject: string) {
    return this.one('o.sso_subject', subject);
  }

  async list(): Promise<OperatorRecord[]> {
    const rows = await this.sql.unsafe<OperatorRow[]>(`${selectOperators} ORDER BY o.email`);
    return rows.map(toOperator);
  }

  async update(id: string, changes: OperatorChanges, audit: OperatorAuditRecord, now: Date) {
    const found = await transaction(this.sql, async (tx) => {
      const [row] = await tx<{ id: string }[]>`
        UPDATE operator SET
          display_name = coalesce(${changes.displayName ?? null}, display_name),
          password_hash = coalesce(${changes.passwordHash ?? null}, password_hash),
          status = coalesce(${changes.status ?? null}, status),
          updated_at = ${now}
        WHERE id = ${id} RETURNING id`;
      if (!row) return false;
      if (changes.roles) {
        await tx`DELETE FROM operator_role_binding WHERE operator_id = ${id} AND source = 'manual'`;
        await insertBindings(tx, id, changes.roles, 'manual');
      }
      // Disabled means out, now: no session of theirs and no token of theirs opens anything. A new
      // password (a reset after a leak) ends the sessions opened with the old one.
      if (changes.status === 'DISABLED' || changes.passwordHash !== undefined)
        await tx`DELETE FROM dashboard_session WHERE operator_id = ${id}`;
      if (changes.status === 'DISABLED')
        await tx`UPDATE operator_token SET revoked_at = ${now} WHERE operator_id = ${id} AND revoked_at IS NULL`;
      await insertAudit(tx, audit);
      return true;
    });
    return found ? this.get(id) : null;
  }

  async endSessions(id: string, audit: OperatorAuditRecord): Promise<number> {
    return transaction(this.sql, async (tx) => {
      const ended = await tx`DELETE FROM dashboard_session WHERE operator_id = ${id} RETURNING 1`;
      await insertAudit(tx, audit);
      return ended.length;
    });
  }

  async signedInThroughSso(id: string, subject: string, roles: RoleBinding[], now: Date): Promise<void> {
    await transaction(this.sql, async (tx) => {
      await tx`UPDATE operator SET sso_subject = ${subject}, updated_at = ${now} WHERE id = ${id}`;
      await tx`DELETE FROM operator_role_binding WHERE operator_id = ${id} AND source = 'sso'`;
      await insertBindings(tx, id, roles, 'sso');
    });
  }
}

export class PostgresOperatorTokenStore implements OperatorTokenStore {
  constructor(private readonly sql: Sql) {}

  async create(token: OperatorTokenRecord, audit: OperatorAuditRecord): Promise<void> {
    await transaction(this.sql, async (tx) => {
      await tx`
        INSERT INTO operator_token (id, operator_id, name, secret_hash, role, created_at, expires_at)
        VALUES (${token.id}, ${token.operatorId}, ${token.name}, ${token.secretHash}, ${token.role},
                ${token.createdAt}, ${token.expiresAt})`;
      await insertAudit(tx, audit);
    });
  }

  async list(operatorId: string): Promise<OperatorTokenRecord[]> {
    const rows = await this.sql<TokenRow[]>`
      SELECT * FROM operator_token WHERE operator_id = ${operatorId} ORDER BY created_at DESC`;
    return rows.map(toToken);
  }

  async revoke(operatorId: string, tokenId: string, now: Date, audit: OperatorAuditRecord): Promise<boolean> {
    return transaction(this.sql, async (tx) => {
      const revoked = await tx`
        UPDATE operator_token SET revoked_at = ${now}
        WHERE id = ${tokenId} AND operator_id = ${operatorId} AND revoked_at IS NULL RETURNING 1`;
      if (revoked.length === 0) return false;
      await insertAudit(tx, audit);
      return true;
    });
  }

  async find(tokenId: string) {
    // The token with its operator as they are now, in one round trip: a disabled operator's finds none.
    const [row] = await this.sql.unsafe<(OperatorRow & TokenColumns)[]>(
      `SELECT op.*, t.id AS token_id, t.name AS token_name, t.secret_hash, t.role AS token_role,
              t.created_at AS token_created_at, t.expires_at, t.revoked_at
       FROM operator_token t JOIN (${selectOperators}) op ON op.id = t.operator_id
       WHERE t.id = $1 AND op.status = 'ACTIVE'`,
      [tokenId],
    );
    if (!row) return null;
    return {
      token: toToken({
        id: row.token_id,
        operator_id: row.id,
        name: row.token_name,
        secret_hash: row.secret_hash,
        role: row.token_role,
        created_at: row.token_created_at,
        expires_at: row.expires_at,
        revoked_at: row.revoked_at,
      }),
      operator: toOperator(row),
    };
  }
}
