/** Broadcasts: a realtime_outbox row the relay publishes, written with its audit record. */
import type { OperatorAuditRecord } from '../../../core/facts/records.ts';
import type { BroadcastRecord, BroadcastStore } from '../../../core/realtime/broadcasts.ts';
import type { Sql } from './database.ts';
import { insertAudit } from './operatorStore.ts';

export class PostgresBroadcastStore implements BroadcastStore {
  constructor(private readonly sql: Sql) {}

  async insert(broadcast: BroadcastRecord, audit: OperatorAuditRecord): Promise<void> {
    await this.sql.begin(async (tx) => {
      await tx`
        INSERT INTO realtime_outbox (id, tenant_id, aggregate_type, aggregate_id, aggregate_version, channel,
                                     projection, payload, available_at, created_at)
        VALUES (${broadcast.id}, ${broadcast.tenantId}, 'BROADCAST', ${broadcast.id}, 1, ${broadcast.channel},
                'BROADCAST', ${tx.json(broadcast.payload as never)}, ${broadcast.createdAt}, ${broadcast.createdAt})`;
      await insertAudit(tx, audit);
    });
  }
}
