/**
 * Rate limits' buckets (`core/definitions/rateLimits.ts`, migration 037): taking a token of each at
 * placement, under the rows' locks until commit.
 */
import { poolLockKey } from '../../../core/definitions/concurrencyKeys.ts';
import { takeToken } from '../../../core/definitions/rateLimits.ts';
import type { RateRefusal } from '../../../core/facts/ports.ts';
import { ownAttempt } from './concurrencyTables.ts';
import type { TxSql } from './database.ts';
import { advisoryLocks } from './transactionReads.ts';

type BucketRow = {
  name: string;
  value: string;
  tokens: number;
  refilled_at: Date;
  limit: number | null;
  interval_ms: number | null;
  paused: boolean;
};

/**
 * Takes a token of each bucket, or none. The buckets are created full on first use and locked (the
 * upsert locks an existing row) in key order, so two placers never both take a bucket's last token and
 * never wait on each other in a circle; a second placement in the same transaction sees the first's
 * take. The limit is the one set at run time, else the one the key's latest definition declares (with
 * its interval), else the task's own. Refused: a paused key, else the
 * bucket whose next token comes last (the step cannot start before it).
 */
export async function takeRateTokens(
  sql: TxSql,
  take: {
    tenantId: string;
    keys: { name: string; value: string; declaredLimit: number; intervalMs: number }[];
    at: Date;
  },
): Promise<RateRefusal | null> {
  const { tenantId, at } = take;
  const keys = [...take.keys].sort((a, b) =>
    a.name === b.name ? (a.value < b.value ? -1 : 1) : a.name < b.name ? -1 : 1,
  );
  // The buckets' rows are locked only under their pools' advisory locks (see `poolLockKey`).
  await advisoryLocks(
    sql,
    keys.map((k) => poolLockKey('rate', tenantId, k.name, k.value)),
  );
  const rows = await sql<BucketRow[]>`
    WITH bucket AS (
      INSERT INTO rate_limit_bucket (tenant_id, name, value, tokens, refilled_at)
      SELECT ${tenantId}, k.name, k.value, k.tokens, ${at}
      FROM unnest(${keys.map((k) => k.name)}::text[], ${keys.map((k) => k.value)}::text[],
                  ${keys.map((k) => k.declaredLimit)}::float8[]) WITH ORDINALITY AS k(name, value, tokens, n)
      ORDER BY k.n
      ON CONFLICT (tenant_id, name, value) DO UPDATE SET tokens = rate_limit_bucket.tokens
      RETURNING name, value, tokens, refilled_at)
    SELECT b.name, b.value, b.tokens, b.refilled_at, coalesce(c."limit", c.declared_limit) AS "limit",
           c.declared_interval_ms AS interval_ms, coalesce(c.paused, false) AS paused
    FROM bucket b LEFT JOIN concurrency_key c ON c.tenant_id = ${tenantId} AND c.name = b.name`;
  const taken: { name: string; value: string; tokens: number }[] = [];
  let refused: RateRefusal | null = null;
  for (const key of keys) {
    const row = rows.find((r) => r.name === key.name && r.value === key.value)!;
    const rate = { limit: row.limit ?? key.declaredLimit, intervalMs: row.interval_ms ?? key.intervalMs };
    const pool = { name: key.name, value: key.value };
    if (row.paused) return { key: pool, ...rate, paused: true, nextAt: at };
    const result = takeToken({ tokens: row.tokens, refilledAt: row.refilled_at }, rate, at);
    if (result.ok) taken.push({ ...pool, tokens: result.tokens });
    else if (!refused || result.nextAt > refused.nextAt)
      refused = { key: pool, ...rate, paused: false, nextAt: result.nextAt };
  }
  if (refused) return refused;
  // A clock behind the bucket's (another replica's) refilled nothing: its refill time stays.
  await sql`
    UPDATE rate_limit_bucket b SET tokens = k.tokens, refilled_at = greatest(b.refilled_at, ${at})
    FROM unnest(${taken.map((t) => t.name)}::text[], ${taken.map((t) => t.value)}::text[],
                ${taken.map((t) => t.tokens)}::float8[]) AS k(name, value, tokens)
    WHERE b.tenant_id = ${tenantId} AND b.name = k.name AND b.value = k.value`;
  return null;
}

/**
 * A step (or map item) a rate limit refused holds no concurrency slot: the slots this transaction just
 * wrote for it at `at` (never committed, so no other placer saw them) are deleted.
 */
export async function dropHeldSlots(
  sql: TxSql,
  stepId: string,
  itemIndex: number | undefined,
  at: Date,
): Promise<void> {
  await sql`
    DELETE FROM concurrency_hold
    WHERE step_id = ${stepId} AND item_index = ${itemIndex ?? ownAttempt} AND created_at = ${at}`;
}
