/** Operator actions a fact carries out (`operator_audit`, migration 015): inserted with it, never changed. */
import type { MergedWrites } from './mergeWrites.ts';
import { type Column, insertStatement, type RowStatement } from './recordset.ts';

const auditColumns: Column[] = [
  ['id', 'uuid'],
  ['action', 'text'],
  ['subject_id', 'text'],
  ['actor', 'text'],
  ['reason', 'text'],
  ['details', 'jsonb'],
  ['created_at', 'timestamptz'],
];

export function pushOperatorAuditStatements(w: MergedWrites, statements: RowStatement[]): void {
  if (w.operatorAudit.length === 0) return;
  statements.push(
    insertStatement(
      'operator_audit',
      auditColumns,
      w.operatorAudit.map((a) => ({
        id: a.id,
        action: a.action,
        subject_id: a.subjectId,
        actor: a.actor,
        reason: a.reason,
        details: a.details,
        created_at: a.createdAt,
      })),
    ),
  );
}
