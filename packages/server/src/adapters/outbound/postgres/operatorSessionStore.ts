/** The operators' dashboard sessions (migration 032): a row per live session, keyed by its id's hash. */
import type { OperatorSessionRow, OperatorSessionStore } from '../../../core/identity/operatorSessions.ts';
import type { Sql } from './database.ts';

export class PostgresOperatorSessionStore implements OperatorSessionStore {
  constructor(private readonly sql: Sql) {}

  async open(session: OperatorSessionRow, idleSince: Date): Promise<void> {
    // Ended sessions go at the next login: operators log in rarely, so no loop is needed for them.
    await this.sql`
      DELETE FROM dashboard_session
      WHERE expires_at <= ${session.createdAt} OR last_seen_at <= ${idleSince}`;
    await this.sql`
      INSERT INTO dashboard_session (id_hash, created_at, last_seen_at, expires_at)
      VALUES (${session.idHash}, ${session.createdAt}, ${session.createdAt}, ${session.expiresAt})`;
  }

  async touch(idHash: Buffer, now: Date, idleSince: Date): Promise<boolean> {
    const rows = await this.sql`
      UPDATE dashboard_session SET last_seen_at = greatest(last_seen_at, ${now})
      WHERE id_hash = ${idHash} AND expires_at > ${now} AND last_seen_at > ${idleSince}
      RETURNING 1`;
    return rows.length === 1;
  }

  async close(idHash: Buffer): Promise<void> {
    await this.sql`DELETE FROM dashboard_session WHERE id_hash = ${idHash}`;
  }
}
