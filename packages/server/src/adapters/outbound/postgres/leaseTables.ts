/**
 * The execution leases (migration 017, document 002 §15.1): one narrow row per RUNNING current step
 * attempt, so that heartbeats renew it without rewriting the wide step row. The fact path keeps each
 * lease in line with its step (created when the attempt runs, health mirrored, deleted when it stops);
 * heartbeats touch only `heartbeat_seq` and `last_heartbeat_at`; a step read takes the later of its own
 * heartbeat columns and its lease's (`leasedStepColumns`).
 */
import type { StepRecord } from '../../../core/facts/records.ts';
import type { HandleHeartbeat, HeartbeatUpdate } from '../../../core/status/ports.ts';
import type { Sql } from './database.ts';
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
 * The columns a step read adds to `s.*` (joined as `LEFT JOIN execution_lease l ON l.attempt_id =
 * s.attempt_id`): the lease's heartbeat, which `toStep` merges with the step's own. The tagged reads
 * (transactionReads' loadTaskState, taskStore) spell the same two columns out.
 */
export const leasedStepColumns =
  'l.heartbeat_seq AS lease_heartbeat_seq, l.last_heartbeat_at AS lease_heartbeat_at';

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
 * the item names if it names one) is looked up by its unique hash, one index probe per item whatever
 * the planner thinks of `unnest`, and its lease renewed as `renewLeases` does; the handles renewed.
 */
export async function renewLeasesByHandle(
  sql: Sql,
  applicationId: string,
  beats: HandleHeartbeat[],
  now: Date,
): Promise<Map<string, string>> {
  const rows = await sql<{ attempt_id: string; handle_hash: string }[]>`
      WITH x AS MATERIALIZED (
        SELECT DISTINCT ON (a.id) a.id, u.handle_hash, u.seq
        FROM unnest(${beats.map((b) => b.handleHash)}::text[], ${beats.map((b) => String(b.heartbeatSeq))}::bigint[],
                    ${beats.map((b) => b.executionId)}::uuid[]) AS u(handle_hash, seq, execution_id)
        CROSS JOIN LATERAL (
          SELECT id FROM attempt
          WHERE handle_hash = decode(u.handle_hash, 'hex') AND application_id = ${applicationId}
            AND expires_at > ${now}) AS a
        WHERE u.execution_id IS NULL OR u.execution_id = a.id
        ORDER BY a.id, u.seq DESC)
      UPDATE execution_lease l SET heartbeat_seq = x.seq, last_heartbeat_at = ${now}
      FROM x
      WHERE l.attempt_id = ANY(ARRAY(SELECT id FROM x)) AND l.attempt_id = x.id
        AND l.health = 'HEALTHY' AND l.heartbeat_seq < x.seq
      RETURNING l.attempt_id, x.handle_hash`;
  return new Map(rows.map((r) => [r.handle_hash, r.attempt_id]));
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
