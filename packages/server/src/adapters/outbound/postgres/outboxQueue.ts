import { newId } from '@tdp/protocol';
import type { Backlog } from '../../../core/operations/ports.ts';
import { afterFailure, type ClaimPolicy, claimPolicy } from '../../../core/outbox/policy.ts';
import type { ClaimedOutboxEvent, OutboxQueue } from '../../../core/outbox/ports.ts';
import type { Sql } from './database.ts';

/**
 * The claim/lease/back-off/dead mechanism, written once. Every outbox-like table has the columns
 * id, status (PENDING, PUBLISHING, PUBLISHED, FAILED, DEAD), attempts, available_at, claim_id,
 * claim_expires_at, last_error, published_at and created_at.
 */
export type ClaimableTable =
  | 'outbox_event'
  | 'timer'
  | 'callback_delivery'
  | 'realtime_outbox'
  | 'user_notification';

export class ClaimableRows {
  constructor(
    protected readonly sql: Sql,
    private readonly table: ClaimableTable,
    protected readonly policy: ClaimPolicy = claimPolicy,
  ) {}

  /**
   * Claims due rows in a short transaction: oldest due first, skipping rows another claimer holds. With
   * `inOrder`, rows of one group go one at a time in their order: a row is due only once every earlier
   * row of its group is published or dead (an earlier one being claimed, even by another replica, or
   * waiting to be retried, holds it back).
   */
  async claim<Row extends object>(
    now: Date,
    limit: number,
    inOrder?: { group: string; order: string },
  ): Promise<(Row & { id: string; claim_id: string; attempts: number })[]> {
    const claimId = newId();
    const leaseUntil = new Date(now.getTime() + this.policy.leaseMs);
    const table = this.sql(this.table);
    const afterEarlier = inOrder
      ? this.sql`AND NOT EXISTS (
          SELECT 1 FROM ${table} AS earlier
          WHERE earlier.${this.sql(inOrder.group)} = ${table}.${this.sql(inOrder.group)}
            AND earlier.${this.sql(inOrder.order)} < ${table}.${this.sql(inOrder.order)}
            AND earlier.status IN ('PENDING', 'PUBLISHING', 'FAILED'))`
      : this.sql``;
    // Due rows and expired claims in two scans, each along its own partial index, stopping at `limit`.
    // One scan with OR is a bitmap scan, which rechecks in the heap every row published since the last
    // vacuum (its old version is still in the due index) on every poll; an index scan in order meets
    // each such entry once and marks it dead for the next.
    return this.sql`
      WITH due AS (
        SELECT id, available_at FROM ${table}
        WHERE status IN ('PENDING', 'FAILED') AND available_at <= ${now}
          ${afterEarlier}
        ORDER BY available_at, id
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      ), expired AS (
        SELECT id, available_at FROM ${table}
        WHERE status = 'PUBLISHING' AND claim_expires_at <= ${now}
          ${afterEarlier}
        ORDER BY available_at, id
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      ), claimed AS (
        SELECT id FROM (SELECT * FROM due UNION ALL SELECT * FROM expired) AS candidates
        ORDER BY available_at, id
        LIMIT ${limit}
      )
      UPDATE ${table} AS row
      SET status = 'PUBLISHING', attempts = row.attempts + 1, claim_id = ${claimId}, claim_expires_at = ${leaseUntil}
      FROM claimed WHERE row.id = claimed.id
      RETURNING row.*` as unknown as Promise<(Row & { id: string; claim_id: string; attempts: number })[]>;
  }

  async markPublished(claimId: string, ids: string[], now: Date): Promise<string[]> {
    const rows = await this.sql<{ id: string }[]>`
      UPDATE ${this.sql(this.table)}
      SET status = 'PUBLISHED', published_at = ${now}, claim_id = NULL, claim_expires_at = NULL, last_error = NULL
      WHERE id = ANY(${ids}::uuid[]) AND claim_id = ${claimId} AND status = 'PUBLISHING'
      RETURNING id`;
    return rows.map((r) => r.id);
  }

  /** Rows published without a claim (the realtime hand-off): unless a claimer has taken them since. */
  async markPublishedUnclaimed(ids: string[], now: Date): Promise<void> {
    await this.sql`
      UPDATE ${this.sql(this.table)}
      SET status = 'PUBLISHED', published_at = ${now}
      WHERE id = ANY(${ids}::uuid[]) AND status = 'PENDING'`;
  }

  async markFailed(
    claimId: string,
    id: string,
    attempts: number,
    error: string,
    now: Date,
  ): Promise<'FAILED' | 'DEAD' | null> {
    // The spread comes from the claim, so the rows of a batch that failed together stay in their order.
    const outcome = afterFailure(attempts, now, this.policy, () => claimFraction(claimId));
    const availableAt = outcome.status === 'FAILED' ? outcome.availableAt : now;
    const rows = await this.sql`
      UPDATE ${this.sql(this.table)}
      SET status = ${outcome.status}, available_at = ${availableAt}, last_error = ${error},
          claim_id = NULL, claim_expires_at = NULL
      WHERE id = ${id} AND claim_id = ${claimId} AND status = 'PUBLISHING'
      RETURNING id`;
    return rows.length > 0 ? outcome.status : null;
  }

  /** Gives up on a row at once (a permanent error); only while the claim is ours. */
  async markDead(claimId: string, id: string, error: string): Promise<boolean> {
    const rows = await this.sql`
      UPDATE ${this.sql(this.table)} SET status = 'DEAD', last_error = ${error}, claim_id = NULL, claim_expires_at = NULL
      WHERE id = ${id} AND claim_id = ${claimId} AND status = 'PUBLISHING' RETURNING id`;
    return rows.length > 0;
  }

  async nextDueAt(): Promise<Date | null> {
    const table = this.sql(this.table);
    const [row] = await this.sql<{ due: Date | null }[]>`
      SELECT least(
        (SELECT min(available_at) FROM ${table} WHERE status IN ('PENDING', 'FAILED')),
        (SELECT min(claim_expires_at) FROM ${table} WHERE status = 'PUBLISHING')
      ) AS due`;
    return row?.due ?? null;
  }

  /**
   * The rows not yet published, by status, and the age of the oldest still to publish. Each status group
   * is read through the partial index that holds only it (due, claimed, dead): the cost is the backlog's,
   * never the published history's.
   */
  async backlog(now: Date): Promise<Backlog> {
    const table = this.sql(this.table);
    const rows = await this.sql<{ status: string; count: number; oldest: Date | null }[]>`
      SELECT status, count(*)::int AS count, min(created_at) AS oldest
      FROM ${table} WHERE status IN ('PENDING', 'FAILED') GROUP BY status
      UNION ALL
      SELECT 'PUBLISHING', count(*)::int, min(created_at) FROM ${table} WHERE status = 'PUBLISHING'
      UNION ALL
      SELECT 'DEAD', count(*)::int, NULL FROM ${table} WHERE status = 'DEAD'`;
    const present = rows.filter((r) => r.count > 0);
    const oldest = present.filter((r) => r.oldest).map((r) => r.oldest!.getTime());
    return {
      byStatus: Object.fromEntries(present.map((r) => [r.status, r.count])),
      oldestAgeSeconds: oldest.length ? Math.max(0, (now.getTime() - Math.min(...oldest)) / 1000) : 0,
    };
  }
}

interface OutboxEventRow {
  id: string;
  claim_id: string;
  attempts: number;
  tenant_id: string;
  application_id: string;
  event_type: string;
  payload: Record<string, unknown>;
  created_at: Date;
}

/** The domain-event outbox on top of the shared claim mechanism. */
export class PostgresOutboxQueue implements OutboxQueue {
  readonly rows: ClaimableRows;

  constructor(sql: Sql, policy: ClaimPolicy = claimPolicy) {
    this.rows = new ClaimableRows(sql, 'outbox_event', policy);
  }

  async claim(now: Date, limit: number): Promise<ClaimedOutboxEvent[]> {
    const rows = await this.rows.claim<OutboxEventRow>(now, limit);
    return rows.map((row) => ({
      id: row.id,
      claimId: row.claim_id,
      attempts: row.attempts,
      tenantId: row.tenant_id,
      applicationId: row.application_id,
      eventType: row.event_type,
      payload: row.payload,
      createdAt: row.created_at,
    }));
  }

  markPublished(claimId: string, ids: string[], now: Date) {
    return this.rows.markPublished(claimId, ids, now);
  }

  markFailed(claimId: string, id: string, attempts: number, error: string, now: Date) {
    return this.rows.markFailed(claimId, id, attempts, error, now);
  }

  nextDueAt() {
    return this.rows.nextDueAt();
  }
}

/** A number in [0, 1) fixed by the claim id (its random bits). */
function claimFraction(claimId: string): number {
  return Number.parseInt(claimId.replaceAll('-', '').slice(-8), 16) / 2 ** 32;
}
