/** Decisions on approval steps (`step_decision`): inserted with their fact, never changed. */
import type { StepDecisionRecord } from '../../../core/facts/records.ts';
import type { TxSql } from './database.ts';
import type { MergedWrites } from './mergeWrites.ts';
import { type Column, insertStatement, type RowStatement } from './recordset.ts';

const decisionColumns: Column[] = [
  ['id', 'uuid'],
  ['task_id', 'uuid'],
  ['step_id', 'uuid'],
  ['step_key', 'text'],
  ['step_attempt', 'integer'],
  ['decided_by', 'text'],
  ['decision', 'text'],
  ['comment', 'text'],
  ['data', 'jsonb'],
  ['reason', 'text'],
  ['idempotency_key', 'text'],
  ['request_hash', 'text'],
  ['outcome', 'text'],
  ['task_version', 'bigint'],
  ['decided_at', 'timestamptz'],
];

export function pushDecisionStatements(w: MergedWrites, statements: RowStatement[]): void {
  if (w.stepDecisions.length === 0) return;
  statements.push(
    insertStatement(
      'step_decision',
      decisionColumns,
      w.stepDecisions.map((d) => ({
        id: d.id,
        task_id: d.taskId,
        step_id: d.stepId,
        step_key: d.stepKey,
        step_attempt: d.stepAttempt,
        decided_by: d.decidedBy,
        decision: d.decision,
        comment: d.comment,
        data: (d.data ?? null) as object | null,
        reason: d.reason,
        idempotency_key: d.idempotencyKey,
        request_hash: d.requestHash,
        outcome: d.outcome,
        task_version: d.taskVersion,
        decided_at: d.decidedAt,
      })),
    ),
  );
}

interface DecisionRow {
  id: string;
  task_id: string;
  step_id: string;
  step_key: string;
  step_attempt: number;
  decided_by: string;
  decision: 'APPROVE' | 'REJECT';
  comment: string | null;
  data: unknown;
  reason: string | null;
  idempotency_key: string;
  request_hash: string;
  outcome: StepDecisionRecord['outcome'];
  task_version: bigint;
  decided_at: Date;
}

export const toDecision = (r: DecisionRow): StepDecisionRecord => ({
  id: r.id,
  taskId: r.task_id,
  stepId: r.step_id,
  stepKey: r.step_key,
  stepAttempt: r.step_attempt,
  decidedBy: r.decided_by,
  decision: r.decision,
  comment: r.comment,
  data: r.data,
  reason: r.reason,
  idempotencyKey: r.idempotency_key,
  requestHash: r.request_hash,
  outcome: r.outcome,
  taskVersion: BigInt(r.task_version),
  decidedAt: r.decided_at,
});

export async function findStepDecisions(
  sql: TxSql,
  taskId: string,
  decidedBy: string,
): Promise<StepDecisionRecord[]> {
  const rows = await sql<DecisionRow[]>`
    SELECT * FROM step_decision WHERE task_id = ${taskId} AND decided_by = ${decidedBy} ORDER BY decided_at, id`;
  return rows.map(toDecision);
}
