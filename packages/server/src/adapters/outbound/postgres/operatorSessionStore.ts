/**
 * The operators' dashboard sessions (migrations 032, 033): a row per live session, keyed by its
 * secret's hash, with the operator it belongs to.
 */
import type { OperatorRole } from '../../../core/identity/operatorAccess.ts';
import type {
  LiveSession,
  OperatorSessionRow,
  OperatorSessionStore,
  SignInMethod,
} from '../../../core/identity/operatorSessions.ts';
import type { Sql } from './database.ts';

export class PostgresOperatorSessionStore implements OperatorSessionStore {
  constructor(private readonly sql: Sql) {}

  async open(session: OperatorSessionRow, idleSince: Date): Promise<void> {
    // Ended sessions go at the next sign-in: operators sign in rarely, so no loop is needed for them.
    await this.sql`
      DELETE FROM dashboard_session
      WHERE expires_at <= ${session.createdAt} OR last_seen_at <= ${idleSince}`;
    await this.sql`
      INSERT INTO dashboard_session (id, id_hash, operator_id, method, created_at, last_seen_at, expires_at)
      VALUES (${session.id}, ${session.idHash}, ${session.operatorId}, ${session.method}, ${session.createdAt},
              ${session.createdAt}, ${session.expiresAt})`;
  }

  async touch(idHash: Buffer, now: Date, idleSince: Date): Promise<LiveSession | null> {
    // The operator's roles are read with the session on every request: a change applies at once.
    const [row] = await this.sql<
      {
        id: string;
        method: SignInMethod;
        operator_id: string | null;
        display_name: string | null;
        email: string | null;
        bindings: { role: OperatorRole; tenantId: string | null }[];
      }[]
    >`
      WITH live AS (
        UPDATE dashboard_session SET last_seen_at = greatest(last_seen_at, ${now})
        WHERE id_hash = ${idHash} AND expires_at > ${now} AND last_seen_at > ${idleSince}
        RETURNING id, method, operator_id
      )
      SELECT live.id, live.method, live.operator_id, o.display_name, o.email,
             coalesce((SELECT json_agg(json_build_object('role', b.role, 'tenantId', b.tenant_id))
                       FROM operator_role_binding b WHERE b.operator_id = live.operator_id), '[]') AS bindings
      FROM live LEFT JOIN operator o ON o.id = live.operator_id
      WHERE live.operator_id IS NULL OR o.status = 'ACTIVE'`;
    if (!row) return null;
    return {
      id: row.id,
      method: row.method,
      operator:
        row.operator_id === null
          ? null
          : {
              id: row.operator_id,
              displayName: row.display_name!,
              email: row.email!,
              bindings: row.bindings,
            },
    };
  }

  async close(idHash: Buffer): Promise<void> {
    await this.sql`DELETE FROM dashboard_session WHERE id_hash = ${idHash}`;
  }
}
