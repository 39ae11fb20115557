import type { SharedStreamSessions, StreamSessionRecord } from '../../../core/realtime/streamSessions.ts';
import { type Sql, transaction } from './database.ts';

/** The channel a replica holding task streams LISTENs on for watch sets stored elsewhere. */
const watchChannel = 'tdp_watch_set';

interface SessionRow {
  session_id: string;
  tenant_id: string;
  application_id: string;
  user_id: string;
  task_ids: string[];
  watch_expires_at: Date | null;
}

const recordOf = (row: SessionRow): StreamSessionRecord => ({
  sessionId: row.session_id,
  tenantId: row.tenant_id,
  applicationId: row.application_id,
  userId: row.user_id,
  taskIds: row.task_ids,
  watchExpiresAt: row.watch_expires_at,
});

/** Task streams in PostgreSQL (migration 025); a NOTIFY per watch-set change, which is rare. */
export class PostgresStreamSessions implements SharedStreamSessions {
  constructor(private readonly sql: Sql) {}

  async open(session: Omit<StreamSessionRecord, 'taskIds' | 'watchExpiresAt'>, aliveUntil: Date) {
    // Streams of a replica that died are forgotten once their renewal has long lapsed.
    await this.sql`
      DELETE FROM task_stream_session WHERE session_id IN (
        SELECT session_id FROM task_stream_session WHERE alive_until < ${new Date(aliveUntil.getTime() - 3600_000)}
        LIMIT 100 FOR UPDATE SKIP LOCKED)`;
    await this.sql`
      INSERT INTO task_stream_session (session_id, tenant_id, application_id, user_id, alive_until)
      VALUES (${session.sessionId}, ${session.tenantId}, ${session.applicationId}, ${session.userId}, ${aliveUntil})`;
  }

  async close(sessionId: string) {
    await this.sql`DELETE FROM task_stream_session WHERE session_id = ${sessionId}`;
  }

  async keepAlive(sessionIds: string[], aliveUntil: Date): Promise<StreamSessionRecord[]> {
    if (sessionIds.length === 0) return [];
    const rows = await this.sql<SessionRow[]>`
      UPDATE task_stream_session SET alive_until = ${aliveUntil} WHERE session_id = ANY(${sessionIds}::uuid[])
      RETURNING session_id, tenant_id, application_id, user_id, task_ids, watch_expires_at`;
    return rows.map(recordOf);
  }

  async find(sessionId: string, now: Date): Promise<StreamSessionRecord | null> {
    if (!/^[0-9a-f-]{36}$/i.test(sessionId)) return null;
    const [row] = await this.sql<SessionRow[]>`
      SELECT session_id, tenant_id, application_id, user_id, task_ids, watch_expires_at
      FROM task_stream_session WHERE session_id = ${sessionId} AND alive_until > ${now}`;
    return row ? recordOf(row) : null;
  }

  async setWatch(sessionId: string, taskIds: string[], watchExpiresAt: Date) {
    await transaction(this.sql, async (sql) => {
      await sql`
        UPDATE task_stream_session SET task_ids = ${taskIds}::uuid[], watch_expires_at = ${watchExpiresAt}
        WHERE session_id = ${sessionId}`;
      // Delivered at commit: the holder reads what this transaction stored.
      await sql`SELECT pg_notify(${watchChannel}, ${sessionId})`;
    });
  }

  async onWatchChanged(listener: (sessionId: string) => void) {
    const listening = await this.sql.listen(watchChannel, listener);
    return listening.unlisten;
  }
}
