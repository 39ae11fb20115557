/** Broadcasts: a realtime_outbox row (of one message) the relay publishes, written with its audit (and idempotency) record. */
import type { IdempotencyRecord, OperatorAuditRecord } from '../../../core/facts/records.ts';
import type { BroadcastRecord, BroadcastStore } from '../../../core/realtime/broadcasts.ts';
import type { StoredRealtimeMessage } from '../../../core/realtime/relay.ts';
import { type Sql, transaction } from './database.ts';
import { findIdempotency } from './eventTables.ts';
import { insertAudit } from './operatorStore.ts';

export class PostgresBroadcastStore implements BroadcastStore {
  constructor(private readonly sql: Sql) {}

  async insert(
    broadcast: BroadcastRecord,
    audit: OperatorAuditRecord,
    idempotency: IdempotencyRecord | null,
  ): Promise<'inserted' | 'keyTaken'> {
    return transaction(this.sql, async (tx) => {
      if (idempotency) {
        // First, so a key already taken (or being taken by a concurrent request, whose commit this
        // waits for) writes nothing.
        const claimed = await tx`
          INSERT INTO idempotency (principal, operation, key, request_hash, response_status, response_body,
                                   created_at)
          VALUES (${idempotency.principal}, ${idempotency.operation}, ${idempotency.key},
                  ${idempotency.requestHash}, ${idempotency.responseStatus},
                  ${tx.json(idempotency.responseBody as never)}, ${idempotency.createdAt})
          ON CONFLICT DO NOTHING
          RETURNING key`;
        if (claimed.length === 0) return 'keyTaken' as const;
      }
      const message: StoredRealtimeMessage = {
        id: broadcast.id,
        tenant_id: broadcast.tenantId,
        aggregate_type: 'BROADCAST',
        aggregate_id: broadcast.id,
        aggregate_version: '1',
        channel: broadcast.channel,
        projection: 'BROADCAST',
        payload: broadcast.payload,
      };
      await tx`
        INSERT INTO realtime_outbox (id, messages, available_at, created_at)
        VALUES (${broadcast.id}, ${tx.json([message] as never)}, ${broadcast.createdAt}, ${broadcast.createdAt})`;
      await insertAudit(tx, audit);
      return 'inserted' as const;
    });
  }

  findIdempotency(principal: string, operation: string, key: string): Promise<IdempotencyRecord | null> {
    return findIdempotency(this.sql, principal, operation, key);
  }
}
