import type { DetailLease, DetailLeases } from '../../../core/realtime/detailLeases.ts';
import { type Sql, transaction } from './database.ts';

/**
 * Detail-subscription leases in PostgreSQL (migration 025), which every replica already shares: one short
 * transaction per token, serialised per connection by an advisory lock so that two replicas minting at
 * once cannot both take the 20th place. Expired leases of the connection go first; a few expired ones
 * of connections long gone go with them, so the table holds little more than the live leases.
 */
export class PostgresDetailLeases implements DetailLeases {
  constructor(private readonly sql: Sql) {}

  take(lease: DetailLease, now: Date, limit: number) {
    return transaction(this.sql, async (sql) => {
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`tdp-detail-lease:${lease.clientId}`}, 0))`;
      await sql`
        DELETE FROM detail_subscription_lease
        WHERE (client_id, channel) IN (
          SELECT client_id, channel FROM detail_subscription_lease
          WHERE expires_at <= ${now} AND client_id <> ${lease.clientId}
          ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED)
          OR (client_id = ${lease.clientId} AND expires_at <= ${now})`;
      const [row] = await sql<{ held: number }[]>`
        SELECT count(*)::int AS held FROM detail_subscription_lease
        WHERE client_id = ${lease.clientId} AND channel <> ${lease.channel}`;
      const held = row?.held ?? 0;
      if (held >= limit) return { taken: false as const, held };
      await sql`
        INSERT INTO detail_subscription_lease (client_id, channel, expires_at, renewed_at)
        VALUES (${lease.clientId}, ${lease.channel}, ${lease.expiresAt}, ${now})
        ON CONFLICT (client_id, channel)
        DO UPDATE SET expires_at = greatest(detail_subscription_lease.expires_at, excluded.expires_at),
                      renewed_at = excluded.renewed_at`;
      return { taken: true as const };
    });
  }

  async settled(clientId: string, before: Date, now: Date): Promise<string[]> {
    const rows = await this.sql<{ channel: string }[]>`
      SELECT channel FROM detail_subscription_lease
      WHERE client_id = ${clientId} AND expires_at > ${now} AND renewed_at < ${before}`;
    return rows.map((row) => row.channel);
  }

  async release(clientId: string, channels: string[]): Promise<void> {
    await this.sql`
      DELETE FROM detail_subscription_lease WHERE client_id = ${clientId} AND channel = ANY(${channels}::text[])`;
  }
}
