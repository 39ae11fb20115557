/** Operator actions a fact carries out (`operator_audit`, migration 015): inserted with it, never changed. */
import type { OperatorAuditRecord } from '../../../core/facts/records.ts';
import type { MergedWrites } from './mergeWrites.ts';
import { type Column, insertStatement, type RowStatement } from './recordset.ts';

const auditColumns: Column[] = [
  ['id', 'uuid'],
  ['action', 'text'],
  ['subject_id', 'text'],
  ['actor', 'text'],
  ['reason', 'text'],
  ['details', 'jsonb'],
  ['operator_id', 'uuid'],
  ['session_id', 'text'],
  ['tenant_id', 'uuid'],
  ['task_id', 'uuid'],
  ['before', 'jsonb'],
  ['after', 'jsonb'],
  ['created_at', 'timestamptz'],
];

/** An audit record as `operator_audit`'s columns (migrations 015 and 033). */
export const auditRow = (a: OperatorAuditRecord) => ({
  id: a.id,
  action: a.action,
  subject_id: a.subjectId,
  actor: a.actor.name,
  reason: a.reason,
  details: a.details,
  operator_id: a.actor.operatorId,
  session_id: a.actor.credentialId,
  tenant_id: a.tenantId ?? null,
  task_id: a.taskId ?? null,
  before: a.before ?? null,
  after: a.after ?? null,
  created_at: a.createdAt,
});

export function pushOperatorAuditStatements(w: MergedWrites, statements: RowStatement[]): void {
  if (w.operatorAudit.length === 0) return;
  statements.push(insertStatement('operator_audit', auditColumns, w.operatorAudit.map(auditRow)));
}
