import type {
  AclEntry,
  RealtimeRecord,
  TaskEventRecord,
  TaskState,
  WorkflowRecord,
} from '../../../core/facts/records.ts';
import type { StatusReads, Viewer } from '../../../core/status/ports.ts';
import { type Sql, transaction } from './database.ts';
import { insertRealtime } from './realtimeOutbox.ts';
import { type TaskRow, toWorkflow, type WorkflowRow } from './rows.ts';
import { PostgresTaskStore } from './taskStore.ts';
import { loadTaskState } from './transactionReads.ts';

interface EventRow {
  id: string;
  task_id: string;
  workflow_id: string | null;
  execution_id: string;
  task_version: bigint;
  type: string;
  producer: string;
  payload: Record<string, unknown>;
  occurred_at: Date;
  received_at: Date | null;
  committed_at: Date;
  task_attempt: number | null;
  step_key: string | null;
  step_attempt: number | null;
  attempt_id: string | null;
  step_version: bigint | null;
  operation_code: string | null;
  source_seq: bigint | null;
  lifecycle_status: TaskEventRecord['lifecycleStatus'] | null;
  business_status: string | null;
  health: TaskEventRecord['health'] | null;
  phase_code: string | null;
  data_schema: string | null;
  error_code: string | null;
  duration_ms: bigint | null;
}

const toEvent = (r: EventRow): TaskEventRecord & { committedAt: Date } => ({
  id: r.id,
  taskId: r.task_id,
  workflowId: r.workflow_id ?? '',
  executionId: r.execution_id,
  taskVersion: r.task_version,
  type: r.type,
  producer: r.producer,
  payload: r.payload,
  occurredAt: r.occurred_at,
  receivedAt: r.received_at ?? r.committed_at,
  committedAt: r.committed_at,
  taskAttempt: r.task_attempt ?? 1,
  stepKey: r.step_key,
  stepAttempt: r.step_attempt,
  attemptId: r.attempt_id,
  stepVersion: r.step_version,
  operationCode: r.operation_code,
  sourceSeq: r.source_seq,
  lifecycleStatus: r.lifecycle_status ?? 'PENDING',
  businessStatus: r.business_status ?? '',
  health: r.health ?? 'HEALTHY',
  phaseCode: r.phase_code,
  dataSchema: r.data_schema,
  errorCode: r.error_code,
  durationMs: r.duration_ms === null ? null : Number(r.duration_ms),
});

export class PostgresStatusReads implements StatusReads {
  private readonly tasks: PostgresTaskStore;

  constructor(private readonly sql: Sql) {
    this.tasks = new PostgresTaskStore(sql);
  }

  async events(taskId: string, afterTaskVersion: bigint, limit: number) {
    const rows = await this.sql<EventRow[]>`
      SELECT * FROM task_event WHERE task_id = ${taskId} AND task_version > ${afterTaskVersion}
      ORDER BY task_version LIMIT ${limit}`;
    return rows.map(toEvent);
  }

  private viewerCondition(viewer: Viewer) {
    const sql = this.sql;
    return sql`(t.owner_id = ${viewer.userId} OR EXISTS (
      SELECT 1 FROM task_acl a WHERE a.task_id = t.id AND a.revoked_at IS NULL AND (
        (a.principal_type = 'USER' AND a.principal_id = ${viewer.userId})
        OR (a.principal_type = 'PROJECT' AND a.principal_id = ANY(${viewer.projects}::text[]))
        OR (a.principal_type = 'ROLE' AND a.principal_id = ANY(${viewer.roles}::text[])))))`;
  }

  async visibleTasks(
    scope: { tenantId: string; applicationId: string | null },
    viewer: Viewer,
    page: { limit: number; before?: { updatedAt: Date; id: string } },
  ) {
    const sql = this.sql;
    const rows = await sql<TaskRow[]>`
      SELECT t.* FROM task t
      WHERE t.tenant_id = ${scope.tenantId} AND ${this.viewerCondition(viewer)}
        ${scope.applicationId ? sql`AND t.application_id = ${scope.applicationId}` : sql``}
        ${page.before ? sql`AND (t.updated_at, t.id) < (${page.before.updatedAt}, ${page.before.id})` : sql``}
      ORDER BY t.updated_at DESC, t.id DESC
      LIMIT ${page.limit}`;
    return this.tasks.withExecutions(rows);
  }

  async canView(taskId: string, viewer: Viewer) {
    const [row] = await this
      .sql`SELECT 1 FROM task t WHERE t.id = ${taskId} AND ${this.viewerCondition(viewer)}`;
    return row !== undefined;
  }

  async tasksOf(workflowId: string): Promise<TaskState[]> {
    const rows = await this.sql<TaskRow[]>`SELECT * FROM task WHERE workflow_id = ${workflowId} ORDER BY id`;
    return this.tasks.withExecutions(rows);
  }

  async workflow(workflowId: string): Promise<WorkflowRecord | null> {
    const [row] = await this.sql<WorkflowRow[]>`SELECT * FROM workflow WHERE id = ${workflowId}`;
    return row ? toWorkflow(row) : null;
  }

  async task(taskId: string): Promise<TaskState | null> {
    const [row] = await this.sql<TaskRow[]>`SELECT * FROM task WHERE id = ${taskId}`;
    return row ? loadTaskState(this.sql, row) : null;
  }

  async pruneEvents(taskId: string, beforeVersion: bigint) {
    await transaction(this.sql, async (tx) => {
      await tx`DELETE FROM task_event WHERE task_id = ${taskId} AND task_version < ${beforeVersion}`;
      await tx`UPDATE task SET events_pruned_before = greatest(events_pruned_before, ${beforeVersion}) WHERE id = ${taskId}`;
    });
  }

  async grantAcl(
    taskId: string,
    entry: AclEntry,
    at: Date,
    announce: (aclVersion: bigint) => RealtimeRecord[],
  ) {
    await transaction(this.sql, async (tx) => {
      // The row lock of the upsert orders concurrent changes of one entry, and so their ACL versions.
      const [row] = await tx<{ acl_version: string }[]>`
        INSERT INTO task_acl (task_id, principal_type, principal_id, permission, created_at, acl_version)
        VALUES (${taskId}, ${entry.principalType}, ${entry.principalId}, ${entry.permission}, ${at}, 1)
        ON CONFLICT (task_id, principal_type, principal_id)
        DO UPDATE SET permission = excluded.permission, revoked_at = NULL, acl_version = task_acl.acl_version + 1
        RETURNING acl_version`;
      await insertRealtime(tx as unknown as Sql, announce(BigInt(row!.acl_version)));
    });
  }

  async revokeAcl(
    taskId: string,
    principalType: string,
    principalId: string,
    at: Date,
    announce: (aclVersion: bigint) => RealtimeRecord[],
  ) {
    return transaction(this.sql, async (tx) => {
      const [row] = await tx<{ acl_version: string }[]>`
        UPDATE task_acl SET revoked_at = ${at}, acl_version = acl_version + 1
        WHERE task_id = ${taskId} AND principal_type = ${principalType} AND principal_id = ${principalId} AND revoked_at IS NULL
        RETURNING acl_version`;
      if (!row) return false;
      await insertRealtime(tx as unknown as Sql, announce(BigInt(row.acl_version)));
      return true;
    });
  }

  async attachExternalRef(
    applicationId: string,
    refType: string,
    refValue: string,
    taskId: string,
    at: Date,
  ) {
    await this.sql`
      INSERT INTO task_external_ref (application_id, ref_type, ref_value, task_id, created_at)
      VALUES (${applicationId}, ${refType}, ${refValue}, ${taskId}, ${at}) ON CONFLICT DO NOTHING`;
    return (await this.findExternalRef(applicationId, refType, refValue))!;
  }

  async findExternalRef(applicationId: string, refType: string, refValue: string) {
    const [row] = await this.sql<{ task_id: string }[]>`
      SELECT task_id FROM task_external_ref
      WHERE application_id = ${applicationId} AND ref_type = ${refType} AND ref_value = ${refValue}`;
    return row?.task_id ?? null;
  }
}
