/**
 * The operator's actions on sessions and nodes (drain, cordon) and their audit records, each action
 * written with its audit record in one transaction.
 */
import type { WorkerCommandRecord } from '../../../core/facts/records.ts';
import type { AuditPage, AuditQuery, OperatorAudit } from '../../../core/operations/ports.ts';
import type {
  DrainOutcome,
  OperatorAuditRecord,
  OperatorWorkerStore,
  StatusChange,
} from '../../../core/workers/ports.ts';
import { auditRow } from './auditTables.ts';
import { type Queryable, type Sql, type TxSql, transaction } from './database.ts';

export async function insertAudit(tx: Queryable, audit: OperatorAuditRecord): Promise<void> {
  const row = auditRow(audit);
  await tx`
    INSERT INTO operator_audit (id, action, subject_id, actor, reason, details, operator_id, session_id,
                                tenant_id, task_id, before, after, created_at)
    VALUES (${row.id}, ${row.action}, ${row.subject_id}, ${row.actor}, ${row.reason},
            ${tx.json(row.details as never)}, ${row.operator_id}, ${row.session_id}, ${row.tenant_id},
            ${row.task_id}, ${row.before === null ? null : tx.json(row.before as never)},
            ${row.after === null ? null : tx.json(row.after as never)}, ${row.created_at})`;
}

/**
 * Drains one live session in the caller's transaction, the row locked: DRAINING from now on, whatever
 * its heartbeats say, with its DRAIN command. A session the operator drained already keeps its first
 * command and audit record and nothing is written. Null when no live session has this id.
 */
export async function drainSession(
  tx: TxSql,
  command: WorkerCommandRecord,
  auditId: string,
): Promise<DrainOutcome | null> {
  const [row] = await tx<{ drain_command_id: string | null; drain_audit_id: string | null }[]>`
    SELECT drain_command_id, drain_audit_id FROM worker
    WHERE id = ${command.workerId} AND ended_at IS NULL FOR UPDATE`;
  if (!row) return null;
  if (row.drain_command_id && row.drain_audit_id)
    return { commandId: row.drain_command_id, auditId: row.drain_audit_id, repeated: true };
  await tx`
    UPDATE worker SET runtime_state = 'DRAINING', drain_requested_at = coalesce(drain_requested_at, ${command.createdAt}),
           drain_command_id = ${command.id}, drain_audit_id = ${auditId}
    WHERE id = ${command.workerId}`;
  await tx`
    INSERT INTO worker_command (id, worker_id, type, payload, created_at)
    VALUES (${command.id}, ${command.workerId}, ${command.type}, ${tx.json(command.payload as never)}, ${command.createdAt})`;
  return { commandId: command.id, auditId, repeated: false };
}

/**
 * A cordon or uncordon that changes nothing: the audit record of the last such action on the subject
 * stands for it. Only a status no operator ever set (a node ACTIVE since it registered) gets this one.
 */
async function repeatOf(tx: TxSql, audit: OperatorAuditRecord): Promise<StatusChange> {
  const [last] = await tx<{ id: string }[]>`
    SELECT id FROM operator_audit WHERE subject_id = ${audit.subjectId} AND action = ${audit.action}
    ORDER BY created_at DESC, id DESC LIMIT 1`;
  if (last) return { auditId: last.id, repeated: true };
  await insertAudit(tx, audit);
  return { auditId: audit.id, repeated: false };
}

export class PostgresOperatorStore implements OperatorWorkerStore, OperatorAudit {
  constructor(private readonly sql: Sql) {}

  async drainNode(
    nodeId: string,
    command: (workerId: string) => WorkerCommandRecord,
    audit: OperatorAuditRecord,
  ) {
    return transaction(this.sql, async (tx) => {
      const [node] = await tx<{ drain_audit_id: string | null }[]>`
        SELECT drain_audit_id FROM worker_node WHERE id = ${nodeId} FOR UPDATE`;
      if (!node) return null;
      const sessions = await tx<{ id: string }[]>`
        SELECT id FROM worker WHERE node_id = ${nodeId} AND ended_at IS NULL ORDER BY id`;
      const workers: { workerId: string; commandId: string }[] = [];
      const sent: WorkerCommandRecord[] = [];
      for (const session of sessions) {
        const drained = command(session.id);
        const outcome = await drainSession(tx, drained, audit.id);
        if (!outcome) continue;
        workers.push({ workerId: session.id, commandId: outcome.commandId });
        if (!outcome.repeated) sent.push(drained);
      }
      // Drained already and nothing new to drain: the earlier drain's answer, nothing written.
      if (node.drain_audit_id && sent.length === 0) return { auditId: node.drain_audit_id, workers, sent };
      await tx`
        UPDATE worker_node SET management_status = 'CORDONED', drain_audit_id = ${audit.id}, updated_at = ${audit.createdAt}
        WHERE id = ${nodeId}`;
      await insertAudit(tx, { ...audit, details: { workers } });
      return { auditId: audit.id, workers, sent };
    });
  }

  async setWorkerScheduling(workerId: string, status: 'ELIGIBLE' | 'INELIGIBLE', audit: OperatorAuditRecord) {
    return transaction(this.sql, async (tx) => {
      const [row] = await tx<{ scheduling_status: string }[]>`
        SELECT scheduling_status FROM worker WHERE id = ${workerId} AND ended_at IS NULL FOR UPDATE`;
      if (!row) return null;
      if (row.scheduling_status === status) return repeatOf(tx, audit);
      await tx`UPDATE worker SET scheduling_status = ${status} WHERE id = ${workerId}`;
      await insertAudit(tx, audit);
      return { auditId: audit.id, repeated: false };
    });
  }

  async setNodeStatus(nodeId: string, status: 'ACTIVE' | 'CORDONED', audit: OperatorAuditRecord) {
    return transaction(this.sql, async (tx) => {
      const [row] = await tx<{ management_status: string }[]>`
        SELECT management_status FROM worker_node WHERE id = ${nodeId} FOR UPDATE`;
      if (!row) return null;
      if (row.management_status === status) return repeatOf(tx, audit);
      await tx`
        UPDATE worker_node SET management_status = ${status}, updated_at = ${audit.createdAt},
               drain_audit_id = CASE WHEN ${status} = 'ACTIVE' THEN NULL ELSE drain_audit_id END
        WHERE id = ${nodeId}`;
      await insertAudit(tx, audit);
      return { auditId: audit.id, repeated: false };
    });
  }

  async auditPage(query: AuditQuery): Promise<AuditPage> {
    // Newest first; the cursor is the last row's (created_at, id), so a page never repeats or skips. A
    // caller who reaches some tenants only sees the rows of those tenants.
    const tenants = query.tenants === 'all' ? null : query.tenants;
    const rows = await this.sql<AuditRow[]>`
      SELECT id, action, subject_id, actor, reason, details, operator_id, session_id, tenant_id, task_id,
             before, after, created_at
      FROM operator_audit
      WHERE (${query.subjectId ?? null}::text IS NULL OR subject_id = ${query.subjectId ?? null})
        AND (${query.action ?? null}::text IS NULL OR action = ${query.action ?? null})
        AND (${query.operatorId ?? null}::uuid IS NULL OR operator_id = ${query.operatorId ?? null})
        AND (${query.tenantId ?? null}::uuid IS NULL OR tenant_id = ${query.tenantId ?? null})
        AND (${query.taskId ?? null}::uuid IS NULL OR task_id = ${query.taskId ?? null})
        AND (${query.from ?? null}::timestamptz IS NULL OR created_at >= ${query.from ?? null})
        AND (${query.to ?? null}::timestamptz IS NULL OR created_at < ${query.to ?? null})
        AND (${tenants}::uuid[] IS NULL OR tenant_id = ANY(${tenants}::uuid[]) OR operator_id = ${query.self}::uuid)
        AND (${query.before?.createdAt ?? null}::timestamptz IS NULL
             OR (created_at, id) < (${query.before?.createdAt ?? null}::timestamptz, ${query.before?.id ?? null}::uuid))
      ORDER BY created_at DESC, id DESC
      LIMIT ${query.limit + 1}`;
    const items = rows.slice(0, query.limit).map(auditRecordOf);
    const last = items.at(-1);
    return {
      items,
      next: rows.length > query.limit && last ? { createdAt: last.createdAt, id: last.id } : null,
    };
  }
}

interface AuditRow {
  id: string;
  action: string;
  subject_id: string;
  actor: string;
  reason: string;
  details: Record<string, unknown>;
  operator_id: string | null;
  session_id: string | null;
  tenant_id: string | null;
  task_id: string | null;
  before: unknown;
  after: unknown;
  created_at: Date;
}

const auditRecordOf = (r: AuditRow): OperatorAuditRecord => ({
  id: r.id,
  action: r.action,
  subjectId: r.subject_id,
  actor: { operatorId: r.operator_id, name: r.actor, credentialId: r.session_id },
  reason: r.reason,
  details: r.details,
  tenantId: r.tenant_id,
  taskId: r.task_id,
  before: r.before,
  after: r.after,
  createdAt: r.created_at,
});
