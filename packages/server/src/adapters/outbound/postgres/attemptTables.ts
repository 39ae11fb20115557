/** The attempt rows (one per lease of a step to a worker): columns, row mappers, statements and reads. */
import type { AttemptRecord } from '../../../core/facts/records.ts';
import type { Queryable } from './database.ts';
import type { MergedWrites } from './mergeWrites.ts';
import {
  type Column,
  insertStatement,
  type RowStatement,
  type RowValue,
  updateStatement,
} from './recordset.ts';

const attemptColumns: Column[] = [
  ['id', 'uuid'],
  ['task_id', 'uuid'],
  ['step_id', 'uuid'],
  ['application_id', 'uuid'],
  ['operation_code', 'text'],
  ['producer_id', 'text'],
  ['allowed_event_types', 'text[]'],
  ['handle_hash', 'bytea'],
  ['handle_sealed', 'text'],
  ['worker_id', 'uuid'],
  ['lease_version', 'integer'],
  ['expires_at', 'timestamptz'],
  ['revoked_at', 'timestamptz'],
  ['created_at', 'timestamptz'],
  ['item_index', 'integer'],
];

const revocationColumns: Column[] = [
  ['id', 'uuid'],
  ['revoked_at', 'timestamptz'],
];

const attemptRow = (a: AttemptRecord): Record<string, RowValue> => ({
  id: a.id,
  task_id: a.taskId,
  step_id: a.stepId,
  application_id: a.applicationId,
  operation_code: a.operationCode,
  producer_id: a.producerId,
  allowed_event_types: a.allowedEventTypes,
  handle_hash: a.handleHash,
  handle_sealed: a.handleSealed,
  worker_id: a.workerId,
  lease_version: a.leaseVersion,
  expires_at: a.expiresAt,
  revoked_at: a.revokedAt,
  created_at: a.createdAt,
  item_index: a.itemIndex,
});

export interface AttemptRow {
  id: string;
  task_id: string;
  step_id: string;
  application_id: string;
  operation_code: string;
  producer_id: string;
  allowed_event_types: string[];
  handle_hash: Buffer;
  handle_sealed: string;
  worker_id: string | null;
  lease_version: number;
  expires_at: Date;
  revoked_at: Date | null;
  created_at: Date;
  item_index: number | null;
}

export const toAttempt = (row: AttemptRow): AttemptRecord => ({
  id: row.id,
  taskId: row.task_id,
  stepId: row.step_id,
  applicationId: row.application_id,
  operationCode: row.operation_code,
  producerId: row.producer_id,
  allowedEventTypes: row.allowed_event_types,
  handleHash: row.handle_hash,
  handleSealed: row.handle_sealed,
  workerId: row.worker_id,
  leaseVersion: row.lease_version,
  expiresAt: row.expires_at,
  revokedAt: row.revoked_at,
  createdAt: row.created_at,
  itemIndex: row.item_index,
});

/**
 * The attempts written, then the revocations of attempts not written in this batch (revoked at
 * `committedAt`, the time of the first fact; none without it).
 */
export function pushAttemptStatements(
  w: MergedWrites,
  committedAt: Date | null,
  statements: RowStatement[],
): void {
  // An attempt written in this batch is revoked in its own row: one statement touches a row once.
  const revoked = new Set(committedAt ? w.revokeAttemptIds : []);
  if (w.attempts.length > 0) {
    statements.push(
      insertStatement(
        'attempt',
        attemptColumns,
        w.attempts.map((a) => {
          const revokedAt = a.revokedAt ?? (revoked.delete(a.id) ? committedAt : null);
          return attemptRow({ ...a, revokedAt });
        }),
        'ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at, revoked_at = coalesce(attempt.revoked_at, excluded.revoked_at)',
      ),
    );
  }
  if (revoked.size > 0) {
    statements.push(
      updateStatement(
        'attempt',
        revocationColumns,
        [...revoked].map((id) => ({ id, revoked_at: committedAt })),
        { assignments: 'revoked_at = coalesce(attempt.revoked_at, x.revoked_at)' },
      ),
    );
  }
}

/** The attempts whose execution handles hash to `hashes` (one read for a batch). */
export async function attemptsByHandle(sql: Queryable, hashes: Buffer[]): Promise<AttemptRecord[]> {
  const rows = await sql<AttemptRow[]>`
    SELECT * FROM attempt
    WHERE handle_hash IN (SELECT decode(h, 'hex') FROM unnest(${hashes.map((h) => h.toString('hex'))}::text[]) AS h)`;
  return rows.map(toAttempt);
}

export async function attemptById(sql: Queryable, attemptId: string): Promise<AttemptRecord | null> {
  const [row] = await sql<AttemptRow[]>`SELECT * FROM attempt WHERE id = ${attemptId}`;
  return row ? toAttempt(row) : null;
}

export async function attemptByHandle(sql: Queryable, handleHash: Buffer): Promise<AttemptRecord | null> {
  const [row] = await sql<AttemptRow[]>`SELECT * FROM attempt WHERE handle_hash = ${handleHash}`;
  return row ? toAttempt(row) : null;
}

export async function attemptsById(sql: Queryable, ids: string[]): Promise<AttemptRecord[]> {
  if (ids.length === 0) return [];
  const rows = await sql<AttemptRow[]>`SELECT * FROM attempt WHERE id = ANY(${ids}::uuid[])`;
  return rows.map(toAttempt);
}
