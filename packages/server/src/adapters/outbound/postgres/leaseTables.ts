/**
 * The execution leases (migration 017, docs/design/execution-leases.md): one narrow row per RUNNING
 * current step attempt, so that heartbeats renew it without rewriting the wide step row. The fact path
 * keeps each lease in line with its step (created when the attempt runs, health mirrored, deleted when
 * it stops); heartbeats touch only `heartbeat_seq` and `last_heartbeat_at`; a step read takes the later
 * of its own heartbeat columns and its lease's (`leasedStepColumns`).
 */
import type { StepRecord } from '../../../core/facts/records.ts';
import type { HandleHeartbeat, HeartbeatUpdate } from '../../../core/status/ports.ts';
import type { DatabaseOptions, Sql } from './database.ts';
import type { MergedWrites } from './mergeWrites.ts';
import { type Column, insertStatement, type RowStatement, type RowValue } from './recordset.ts';

const leaseColumns: Column[] = [
  ['attempt_id', 'uuid'],
  ['task_id', 'uuid'],
  ['heartbeat_seq', 'bigint'],
  ['last_heartbeat_at', 'timestamptz'],
  ['health', 'text'],
  ['stale_since', 'timestamptz'],
  ['heartbeat_timeout_seconds', 'integer'],
  ['leased_at', 'timestamptz'],
];

/**
 * A fact's step state wins for health; the heartbeat columns only move forward (a heartbeat may have
 * renewed the lease after the fact read its step). An unchanged lease is left as it is.
 */
const upsertSuffix = `
  ON CONFLICT (attempt_id) DO UPDATE SET
    heartbeat_seq = greatest(execution_lease.heartbeat_seq, excluded.heartbeat_seq),
    last_heartbeat_at = greatest(execution_lease.last_heartbeat_at, excluded.last_heartbeat_at),
    health = excluded.health, stale_since = excluded.stale_since,
    heartbeat_timeout_seconds = excluded.heartbeat_timeout_seconds
  WHERE (execution_lease.health, execution_lease.stale_since, execution_lease.heartbeat_timeout_seconds)
          IS DISTINCT FROM (excluded.health, excluded.stale_since, excluded.heartbeat_timeout_seconds)
     OR excluded.heartbeat_seq > execution_lease.heartbeat_seq
     OR excluded.last_heartbeat_at > execution_lease.last_heartbeat_at`;

const deleteText = `
  DELETE FROM execution_lease
  WHERE attempt_id = ANY(ARRAY(SELECT x.attempt_id FROM jsonb_to_recordset($1::text::jsonb) AS x(attempt_id uuid)))`;

/** Whether a step attempt holds a lease: it is the step's current attempt and it runs. */
const leased = (s: StepRecord) => s.attemptId !== null && s.current && s.status === 'RUNNING';

const leaseRow = (s: StepRecord): Record<string, RowValue> => ({
  attempt_id: s.attemptId,
  task_id: s.taskId,
  heartbeat_seq: s.lastHeartbeatSeq,
  last_heartbeat_at: s.lastHeartbeatAt,
  health: s.health,
  stale_since: s.staleSince,
  heartbeat_timeout_seconds: s.heartbeatTimeoutSeconds,
  leased_at: s.startedAt ?? s.updatedAt,
});

/** The leases of the written steps: upserted for running attempts, deleted for the others. */
export function pushLeaseStatements(w: MergedWrites, statements: RowStatement[]): void {
  // In attempt id order, the order a heartbeat batch locks leases in: the two never wait on each other
  // in a cycle.
  const written = [...w.newSteps, ...w.steps]
    .filter((s) => s.attemptId !== null)
    .sort((a, b) => (a.attemptId! < b.attemptId! ? -1 : 1));
  const live = written.filter(leased);
  const ended = written.filter((s) => !leased(s));
  if (live.length > 0)
    statements.push(insertStatement('execution_lease', leaseColumns, live.map(leaseRow), upsertSuffix));
  if (ended.length > 0)
    statements.push({
      text: deleteText,
      rows: JSON.stringify(ended.map((s) => ({ attempt_id: s.attemptId }))),
    });
}

/**
 * The columns a step read adds to `s.*` (joined with `leaseOfStep`): the lease's heartbeat, which
 * `toStep` merges with the step's own.
 */
export const leasedStepColumns =
  'l.heartbeat_seq AS lease_heartbeat_seq, l.last_heartbeat_at AS lease_heartbeat_at';

/**
 * A step's lease (`l`), looked up by its attempt: one key probe per step, whatever the statistics say.
 * As a plain join, a plan made while the table looked empty scanned the whole lease table, or its whole
 * index, once per step; the table is small, but while a long transaction holds PostgreSQL's horizon it
 * keeps every lease ever deleted, and one report's read took 9 ms. OFFSET 0 keeps the planner from
 * turning the lookup back into that join.
 */
export const leaseOfStep = `LEFT JOIN LATERAL (
    SELECT heartbeat_seq, last_heartbeat_at FROM execution_lease WHERE attempt_id = s.attempt_id OFFSET 0
  ) l ON true`;

/**
 * The session of the pool heartbeats renew leases on, apart from the main pool so that a burst of
 * beats never queues a fact transaction (nor one a beat):
 * - its commits do not wait for their WAL to reach the disk. A renewal lost in a database crash (the
 *   last few hundred milliseconds of them) is what the next beat renews again; leases are judged by
 *   heartbeat timeouts of many seconds, and every fact stays on the main pool's durable commits;
 * - its two statements keep one generic plan (an index probe per item, whatever the batch's size)
 *   instead of being planned again on every batch.
 * The events benchmark's heartbeat floor runs on a session of the same settings.
 */
export const heartbeatSession = {
  synchronousCommit: 'off',
  planCacheMode: 'force_generic_plan',
} as const satisfies Partial<DatabaseOptions>;

/**
 * Renews the leases of healthy running attempts whose heartbeat is newer, in one statement (a HOT
 * update: neither column is indexed); the attempts renewed.
 */
export async function renewLeases(sql: Sql, updates: HeartbeatUpdate[], now: Date): Promise<Set<string>> {
  const rows = await sql<{ attempt_id: string }[]>`
      UPDATE execution_lease l SET heartbeat_seq = x.seq, last_heartbeat_at = ${now}
      FROM (SELECT DISTINCT ON (attempt_id) attempt_id, seq
            FROM unnest(${updates.map((u) => u.attemptId)}::uuid[], ${updates.map((u) => String(u.heartbeatSeq))}::bigint[])
                 AS u(attempt_id, seq)
            ORDER BY attempt_id, seq DESC) AS x
      WHERE l.attempt_id = x.attempt_id AND l.health = 'HEALTHY' AND l.heartbeat_seq < x.seq
      RETURNING l.attempt_id`;
  return new Set(rows.map((r) => r.attempt_id));
}

/**
 * Heartbeats by handle in one statement: each handle's attempt (the application's, unexpired, the one
 * the item names if it names one) is found by its unique hash and its lease renewed as `renewLeases`
 * does; for each beat, the attempt it renewed. A plain join, which the planner takes as an index probe
 * per item: the same statement written as a materialised CTE with `DISTINCT ON` and an `ANY(ARRAY(…))`
 * probe cost PostgreSQL twice the CPU per batch (`bench -- events`). Of two beats of one attempt in a
 * batch, UPDATE … FROM renews the row once, with one of them; the other is told apart by the caller.
 */
export async function renewLeasesByHandle(
  sql: Sql,
  applicationId: string,
  beats: HandleHeartbeat[],
  now: Date,
): Promise<(string | undefined)[]> {
  // The renewals come back as one text (`ordinal attempt_id,…`): a row each cost the driver more to
  // read than the rest of the batch's work in this process.
  const [answer] = await sql<{ renewed: string | null }[]>`
      WITH renewed AS (
        UPDATE execution_lease l SET heartbeat_seq = u.seq, last_heartbeat_at = ${now}
        FROM unnest(${beats.map((b) => b.handleHash)}::text[], ${beats.map((b) => String(b.heartbeatSeq))}::bigint[],
                    ${beats.map((b) => b.executionId)}::uuid[]) WITH ORDINALITY AS u(handle_hash, seq, execution_id, n)
          JOIN attempt a ON a.handle_hash = decode(u.handle_hash, 'hex')
        WHERE l.attempt_id = a.id AND a.application_id = ${applicationId} AND a.expires_at > ${now}
          AND (u.execution_id IS NULL OR u.execution_id = a.id)
          AND l.health = 'HEALTHY' AND l.heartbeat_seq < u.seq
        RETURNING u.n, l.attempt_id)
      SELECT string_agg(n || ' ' || attempt_id, ',') AS renewed FROM renewed`;
  const attempts: (string | undefined)[] = new Array(beats.length);
  for (const pair of answer?.renewed?.split(',') ?? []) {
    const space = pair.indexOf(' ');
    attempts[Number(pair.slice(0, space)) - 1] = pair.slice(space + 1);
  }
  return attempts;
}

/**
 * Tasks with a healthy lease past its heartbeat deadline, soonest first. The table holds running
 * attempts only, so it is read whole rather than through an index its updates would have to maintain.
 */
export async function overdueTasks(sql: Sql, now: Date, limit: number): Promise<string[]> {
  const rows = await sql<{ task_id: string }[]>`
      SELECT DISTINCT task_id FROM (
        SELECT task_id FROM execution_lease
        WHERE health = 'HEALTHY' AND heartbeat_timeout_seconds IS NOT NULL
          AND coalesce(last_heartbeat_at, leased_at) + make_interval(secs => heartbeat_timeout_seconds) <= ${now}
        ORDER BY coalesce(last_heartbeat_at, leased_at) + make_interval(secs => heartbeat_timeout_seconds)
        LIMIT ${limit}) AS due`;
  return rows.map((r) => r.task_id);
}
