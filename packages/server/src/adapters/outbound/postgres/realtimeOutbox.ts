/**
 * The realtime outbox (migration 030): one row per commit holding that commit's messages in order, on
 * the shared claim mechanism. A row's messages share its fate: published, retried or DEAD together.
 * After a round that sent only some of them, the relay splits the row by fate (`settle`), so a message
 * that went is never sent again and one refused for good waits alone in a DEAD row.
 */
import { newId } from '@tdp/protocol';
import type { RealtimeRecord } from '../../../core/facts/records.ts';
import { type ClaimPolicy, claimPolicy } from '../../../core/outbox/policy.ts';
import type {
  RealtimeOutboxRow,
  RealtimeRows,
  RealtimeSettlement,
  StoredRealtimeMessage,
} from '../../../core/realtime/relay.ts';
import { type Queryable, type Sql, transaction } from './database.ts';
import { ClaimableRows } from './outboxQueue.ts';
import { type Column, insertStatement, type RowStatement, run } from './recordset.ts';

const columns: Column[] = [
  ['id', 'uuid'],
  ['messages', 'jsonb'],
  ['available_at', 'timestamptz'],
  ['created_at', 'timestamptz'],
];

function storedMessage(record: RealtimeRecord): StoredRealtimeMessage {
  return {
    id: record.id,
    tenant_id: record.tenantId,
    aggregate_type: record.aggregateType,
    aggregate_id: record.aggregateId,
    aggregate_version: record.aggregateVersion.toString(),
    channel: record.channel,
    projection: record.projection,
    payload: record.payload,
  };
}

/**
 * The rows of `records`: one per `outboxId` (a fact transaction gives all its records one), in the order
 * of their first record; a record without one is a row of its own. A row written earlier in the same
 * transaction (by an earlier write of the session) gets the new messages appended.
 */
export function realtimeOutboxInsert(records: RealtimeRecord[]): RowStatement {
  const rows = new Map<
    string,
    { id: string; messages: StoredRealtimeMessage[]; available_at: Date; created_at: Date }
  >();
  for (const record of records) {
    const id = record.outboxId ?? record.id;
    let row = rows.get(id);
    if (!row) {
      row = {
        id,
        messages: [],
        available_at: record.availableAt ?? record.createdAt,
        created_at: record.createdAt,
      };
      rows.set(id, row);
    }
    row.messages.push(storedMessage(record));
  }
  return insertStatement(
    'realtime_outbox',
    columns,
    [...rows.values()],
    'ON CONFLICT (id) DO UPDATE SET messages = realtime_outbox.messages || excluded.messages',
  );
}

/** Stores `records` (outside a fact transaction: an ACL change, a broadcast). */
export async function insertRealtime(sql: Queryable, records: RealtimeRecord[]): Promise<void> {
  if (records.length > 0) await run(sql, realtimeOutboxInsert(records));
}

export class PostgresRealtimeOutbox extends ClaimableRows implements RealtimeRows {
  constructor(sql: Sql, policy: ClaimPolicy = claimPolicy) {
    super(sql, 'realtime_outbox', policy);
  }

  claimRows(now: Date, limit: number): Promise<RealtimeOutboxRow[]> {
    return this.claim<RealtimeOutboxRow>(now, limit);
  }

  /**
   * A claimed row some of whose messages did not go, split by their fate: the row keeps those to retry
   * (FAILED with back-off, or DEAD past the limit) or, with none, those sent (PUBLISHED); the others move
   * to rows of their own, PUBLISHED or DEAD. All refused for good: the row is DEAD. Returns what became
   * of the row (null: the claim was lost, nothing changed).
   */
  async settle(
    claimId: string,
    row: RealtimeOutboxRow,
    messages: RealtimeSettlement,
    error: string,
    now: Date,
  ): Promise<'FAILED' | 'DEAD' | 'PUBLISHED' | null> {
    const { sent, retry, refused } = messages;
    if (sent.length === 0 && retry.length === 0)
      return (await this.markDead(claimId, row.id, error)) ? 'DEAD' : null;
    return transaction(this.sql, async (tx) => {
      const [kept] = await tx<{ id: string }[]>`
        UPDATE realtime_outbox SET messages = ${tx.json((retry.length > 0 ? retry : sent) as never)}
        WHERE id = ${row.id} AND claim_id = ${claimId} AND status = 'PUBLISHING' RETURNING id`;
      if (!kept) return null;
      const moved = [
        { status: 'PUBLISHED', messages: retry.length > 0 ? sent : [], error: null, publishedAt: now },
        { status: 'DEAD', messages: refused, error, publishedAt: null },
      ];
      for (const part of moved.filter((p) => p.messages.length > 0))
        await tx`
          INSERT INTO realtime_outbox (id, messages, status, attempts, available_at, last_error, created_at,
                                       published_at)
          VALUES (${newId()}, ${tx.json(part.messages as never)}, ${part.status}, ${row.attempts}, ${now},
                  ${part.error}, ${row.created_at}, ${part.publishedAt})`;
      const inTransaction = new ClaimableRows(tx as unknown as Sql, 'realtime_outbox', this.policy);
      if (retry.length > 0) return inTransaction.markFailed(claimId, row.id, row.attempts, error, now);
      await inTransaction.markPublished(claimId, [row.id], now);
      return 'PUBLISHED';
    });
  }
}
