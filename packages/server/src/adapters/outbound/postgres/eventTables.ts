/**
 * The task's event log and the rows that make a retried request answer as its first time did: task_event,
 * event_dedup and idempotency (columns, row mappers, statements and reads).
 */
import type { DedupRecord, IdempotencyRecord, TaskEventRecord } from '../../../core/facts/records.ts';
import type { Queryable, TxSql } from './database.ts';
import type { MergedWrites } from './mergeWrites.ts';
import { type Column, insertStatement, type RowStatement, type RowValue } from './recordset.ts';

const eventColumns: Column[] = [
  ['id', 'uuid'],
  ['task_id', 'uuid'],
  ['execution_id', 'uuid'],
  ['task_version', 'bigint'],
  ['type', 'text'],
  ['producer', 'text'],
  ['payload', 'jsonb'],
  ['occurred_at', 'timestamptz'],
  ['committed_at', 'timestamptz'],
  ['workflow_id', 'uuid'],
  ['step_key', 'text'],
  ['step_attempt', 'integer'],
  ['attempt_id', 'uuid'],
  ['step_version', 'bigint'],
  ['task_attempt', 'integer'],
  ['operation_code', 'text'],
  ['source_seq', 'bigint'],
  ['lifecycle_status', 'text'],
  ['business_status', 'text'],
  ['health', 'text'],
  ['phase_code', 'text'],
  ['data_schema', 'text'],
  ['error_code', 'text'],
  ['received_at', 'timestamptz'],
  ['duration_ms', 'bigint'],
];

// An event is committed at the time its session started (the injected clock): its receivedAt.
const eventRow = (e: TaskEventRecord): Record<string, RowValue> => ({
  id: e.id,
  task_id: e.taskId,
  execution_id: e.executionId,
  task_version: e.taskVersion,
  type: e.type,
  producer: e.producer,
  payload: e.payload,
  occurred_at: e.occurredAt,
  committed_at: e.receivedAt,
  workflow_id: e.workflowId,
  step_key: e.stepKey,
  step_attempt: e.stepAttempt,
  attempt_id: e.attemptId,
  step_version: e.stepVersion,
  task_attempt: e.taskAttempt,
  operation_code: e.operationCode,
  source_seq: e.sourceSeq,
  lifecycle_status: e.lifecycleStatus,
  business_status: e.businessStatus,
  health: e.health,
  phase_code: e.phaseCode,
  data_schema: e.dataSchema,
  error_code: e.errorCode,
  received_at: e.receivedAt,
  duration_ms: e.durationMs,
});

const dedupColumns: Column[] = [
  ['event_id', 'uuid'],
  ['task_id', 'uuid'],
  ['payload_hash', 'text'],
  ['result', 'jsonb'],
  ['created_at', 'timestamptz'],
];

interface DedupRow {
  event_id: string;
  task_id: string;
  payload_hash: string;
  result: Record<string, unknown>;
  created_at: Date;
}

const toDedup = (row: DedupRow): DedupRecord => ({
  eventId: row.event_id,
  taskId: row.task_id,
  payloadHash: row.payload_hash,
  result: row.result,
  createdAt: row.created_at,
});

const idempotencyColumns: Column[] = [
  ['principal', 'text'],
  ['operation', 'text'],
  ['key', 'text'],
  ['request_hash', 'text'],
  ['response_status', 'integer'],
  ['response_body', 'jsonb'],
  ['created_at', 'timestamptz'],
];

const idempotencyRow = (r: IdempotencyRecord): Record<string, RowValue> => ({
  principal: r.principal,
  operation: r.operation,
  key: r.key,
  request_hash: r.requestHash,
  response_status: r.responseStatus,
  response_body: r.responseBody as RowValue,
  created_at: r.createdAt,
});

/** The idempotency claims (one per transaction), first of a transaction's statements. */
export function pushIdempotencyStatement(w: MergedWrites, statements: RowStatement[]): void {
  // No ON CONFLICT: a key already taken fails the statement (the caller answers with a replay).
  if (w.idempotency.length > 0)
    statements.push(insertStatement('idempotency', idempotencyColumns, w.idempotency.map(idempotencyRow)));
}

/** The events, then their dedup rows. */
export function pushEventStatements(w: MergedWrites, statements: RowStatement[]): void {
  if (w.events.length > 0)
    statements.push(insertStatement('task_event', eventColumns, w.events.map(eventRow)));
  if (w.dedup.length > 0) {
    statements.push(
      insertStatement(
        'event_dedup',
        dedupColumns,
        w.dedup.map((d) => ({
          event_id: d.eventId,
          task_id: d.taskId,
          payload_hash: d.payloadHash,
          result: d.result,
          created_at: d.createdAt,
        })),
      ),
    );
  }
}

export async function findDedup(sql: TxSql, eventId: string): Promise<DedupRecord | null> {
  const [row] = await sql<DedupRow[]>`
      SELECT * FROM event_dedup WHERE event_id = ${eventId}`;
  return row ? toDedup(row) : null;
}

export async function findDedups(sql: TxSql, eventIds: string[]): Promise<DedupRecord[]> {
  const rows = await sql<DedupRow[]>`
      SELECT * FROM event_dedup WHERE event_id = ANY(${eventIds}::uuid[])`;
  return rows.map(toDedup);
}

export async function findIdempotency(
  sql: Queryable,
  principal: string,
  operation: string,
  key: string,
): Promise<IdempotencyRecord | null> {
  const [row] = await sql<
    { request_hash: string; response_status: number; response_body: unknown; created_at: Date }[]
  >`
      SELECT request_hash, response_status, response_body, created_at FROM idempotency
      WHERE principal = ${principal} AND operation = ${operation} AND key = ${key}`;
  return row
    ? {
        principal,
        operation,
        key,
        requestHash: row.request_hash,
        responseStatus: row.response_status,
        responseBody: row.response_body,
        createdAt: row.created_at,
      }
    : null;
}
