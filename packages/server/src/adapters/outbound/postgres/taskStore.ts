import type { ExecutionStatus, LifecycleStatus, StepStatus } from '@tdp/protocol';
import type {
  ExecutionRecord,
  ExecutionSnapshot,
  OutboxRecord,
  StepRecord,
  TaskEventRecord,
  TaskRecord,
  TaskState,
} from '../../../core/tasks/model.ts';
import type {
  IdempotencyRecord,
  NewTaskGraph,
  TaskChange,
  TaskListFilter,
  TaskStore,
  TaskTransaction,
} from '../../../core/tasks/ports.ts';
import type { Queryable, Sql, TxSql } from './database.ts';

interface TaskRow {
  id: string;
  tenant_id: string;
  application_id: string;
  workflow_definition_id: string;
  workflow_name: string;
  workflow_version: string;
  name: string;
  external_ref: string | null;
  input: unknown;
  callback_url: string | null;
  priority: number;
  owner_id: string | null;
  lifecycle_status: LifecycleStatus;
  version: bigint;
  current_execution_id: string;
  created_at: Date;
  updated_at: Date;
}

interface ExecutionRow {
  id: string;
  task_id: string;
  number: number;
  status: ExecutionStatus;
  progress: number;
  snapshot: ExecutionSnapshot;
  version: bigint;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  updated_at: Date;
}

interface StepRow {
  id: string;
  execution_id: string;
  step_key: string;
  capability: string;
  capability_version: string;
  depends_on: string[];
  status: StepStatus;
  version: bigint;
  created_at: Date;
  updated_at: Date;
}

const toTask = (r: TaskRow): TaskRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  applicationId: r.application_id,
  workflowDefinitionId: r.workflow_definition_id,
  workflowName: r.workflow_name,
  workflowVersion: r.workflow_version,
  name: r.name,
  externalRef: r.external_ref,
  input: r.input,
  callbackUrl: r.callback_url,
  priority: r.priority,
  ownerId: r.owner_id,
  lifecycleStatus: r.lifecycle_status,
  version: r.version,
  currentExecutionId: r.current_execution_id,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

const toExecution = (r: ExecutionRow): ExecutionRecord => ({
  id: r.id,
  taskId: r.task_id,
  number: r.number,
  status: r.status,
  progress: r.progress,
  snapshot: r.snapshot,
  version: r.version,
  createdAt: r.created_at,
  startedAt: r.started_at,
  completedAt: r.completed_at,
  updatedAt: r.updated_at,
});

const toStep = (r: StepRow): StepRecord => ({
  id: r.id,
  executionId: r.execution_id,
  key: r.step_key,
  capability: r.capability,
  capabilityVersion: r.capability_version,
  dependsOn: r.depends_on,
  status: r.status,
  version: r.version,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

function insertEvent(sql: TxSql, event: TaskEventRecord, committedAt: Date) {
  return sql`
    INSERT INTO task_event (id, task_id, execution_id, task_version, type, producer, payload, occurred_at, committed_at)
    VALUES (${event.id}, ${event.taskId}, ${event.executionId}, ${event.taskVersion}, ${event.type}, ${event.producer},
            ${sql.json(event.payload as never)}, ${event.occurredAt}, ${committedAt})`;
}

function insertOutbox(sql: TxSql, rows: OutboxRecord[]) {
  return sql`
    INSERT INTO outbox_event (id, tenant_id, application_id, aggregate_id, event_type, payload, available_at, created_at)
    SELECT id, tenant_id, application_id, aggregate_id, event_type, payload::jsonb, created_at, created_at
    FROM unnest(
      ${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => r.tenantId)}::uuid[], ${rows.map((r) => r.applicationId)}::uuid[],
      ${rows.map((r) => r.aggregateId)}::uuid[], ${rows.map((r) => r.eventType)}::text[],
      ${rows.map((r) => JSON.stringify(r.payload))}::text[], ${rows.map((r) => r.createdAt.toISOString())}::timestamptz[])
      AS o(id, tenant_id, application_id, aggregate_id, event_type, payload, created_at)`;
}

class PostgresTaskTransaction implements TaskTransaction {
  constructor(private readonly sql: TxSql) {}

  async lockTask(applicationId: string, taskId: string): Promise<TaskState | null> {
    const [task] = await this.sql<TaskRow[]>`
      SELECT * FROM task WHERE id = ${taskId} AND application_id = ${applicationId} FOR UPDATE`;
    if (!task) return null;
    return loadState(this.sql, toTask(task));
  }

  async saveChange({ task: t, execution: e, steps, event, outbox }: TaskChange): Promise<void> {
    const sql = this.sql;
    await Promise.all([
      sql`
        UPDATE task SET lifecycle_status = ${t.lifecycleStatus}, version = ${t.version},
                        current_execution_id = ${t.currentExecutionId}, updated_at = ${t.updatedAt}
        WHERE id = ${t.id}`,
      sql`
        UPDATE execution SET status = ${e.status}, progress = ${e.progress}, version = ${e.version},
                             started_at = ${e.startedAt}, completed_at = ${e.completedAt}, updated_at = ${e.updatedAt}
        WHERE id = ${e.id}`,
      sql`
        UPDATE step SET status = s.status, version = s.version, updated_at = s.updated_at
        FROM unnest(${steps.map((s) => s.id)}::uuid[], ${steps.map((s) => s.status)}::text[],
                    ${steps.map((s) => s.version.toString())}::bigint[],
                    ${steps.map((s) => s.updatedAt.toISOString())}::timestamptz[])
             AS s(id, status, version, updated_at)
        WHERE step.id = s.id AND (step.status, step.version) IS DISTINCT FROM (s.status, s.version)`,
      insertEvent(sql, event, t.updatedAt),
      insertOutbox(sql, outbox),
    ]);
  }
}

async function loadState(sql: Queryable, task: TaskRecord): Promise<TaskState> {
  const [[execution], steps] = await Promise.all([
    sql<ExecutionRow[]>`SELECT * FROM execution WHERE id = ${task.currentExecutionId}`,
    sql<StepRow[]>`SELECT * FROM step WHERE execution_id = ${task.currentExecutionId} ORDER BY id`,
  ]);
  if (!execution) throw new Error(`task ${task.id} has no execution ${task.currentExecutionId}`);
  return { task, execution: toExecution(execution), steps: steps.map(toStep) };
}

/** Thrown inside the create transaction to roll it back when the idempotency key is already taken. */
class KeyTaken extends Error {}

export class PostgresTaskStore implements TaskStore {
  constructor(private readonly sql: Sql) {}

  async createTask(record: IdempotencyRecord, { task: t, execution: e, steps, event, outbox }: NewTaskGraph) {
    try {
      await this.sql.begin(async (sql) => {
        // All statements go out back to back (pipelined) and run in order in this transaction. If the key
        // is taken, the idempotency insert returns no row (after waiting for a concurrent holder of the
        // key to commit) and everything is rolled back; the common case costs a single round trip.
        const [claimed] = await Promise.all([
          sql`
            INSERT INTO idempotency (principal, operation, key, request_hash, response_status, response_body, created_at)
            VALUES (${record.principal}, ${record.operation}, ${record.key}, ${record.requestHash}, ${record.responseStatus},
                    ${sql.json(record.responseBody as never)}, ${record.createdAt})
            ON CONFLICT DO NOTHING
            RETURNING 1`,
          sql`
            INSERT INTO task (id, tenant_id, application_id, workflow_definition_id, workflow_name, workflow_version, name,
                              external_ref, input, callback_url, priority, owner_id, lifecycle_status, version,
                              current_execution_id, created_at, updated_at)
            VALUES (${t.id}, ${t.tenantId}, ${t.applicationId}, ${t.workflowDefinitionId}, ${t.workflowName},
                    ${t.workflowVersion}, ${t.name}, ${t.externalRef}, ${sql.json(t.input as never)}, ${t.callbackUrl},
                    ${t.priority}, ${t.ownerId}, ${t.lifecycleStatus}, ${t.version}, ${t.currentExecutionId},
                    ${t.createdAt}, ${t.updatedAt})`,
          sql`
            INSERT INTO execution (id, task_id, number, status, progress, snapshot, version, created_at, updated_at)
            VALUES (${e.id}, ${e.taskId}, ${e.number}, ${e.status}, ${e.progress}, ${sql.json(e.snapshot as never)},
                    ${e.version}, ${e.createdAt}, ${e.updatedAt})`,
          sql`
            INSERT INTO step (id, execution_id, step_key, capability, capability_version, depends_on, status, version,
                              created_at, updated_at)
            SELECT id, ${e.id}::uuid, step_key, capability, capability_version, string_to_array(depends_on, ','), status, 1,
                   ${e.createdAt}::timestamptz, ${e.createdAt}::timestamptz
            FROM unnest(${steps.map((s) => s.id)}::uuid[], ${steps.map((s) => s.key)}::text[],
                        ${steps.map((s) => s.capability)}::text[], ${steps.map((s) => s.capabilityVersion)}::text[],
                        ${steps.map((s) => s.dependsOn.join(','))}::text[], ${steps.map((s) => s.status)}::text[])
                 AS s(id, step_key, capability, capability_version, depends_on, status)`,
          insertEvent(sql, event, t.createdAt),
          insertOutbox(sql, outbox),
        ]);
        if (claimed.length === 0) throw new KeyTaken();
      });
      return null;
    } catch (error) {
      if (!(error instanceof KeyTaken)) throw error;
    }
    const [existing] = await this.sql<
      { request_hash: string; response_status: number; response_body: unknown; created_at: Date }[]
    >`SELECT request_hash, response_status, response_body, created_at FROM idempotency
      WHERE principal = ${record.principal} AND operation = ${record.operation} AND key = ${record.key}`;
    if (!existing) throw new Error('idempotency record conflicted but cannot be read');
    return {
      ...record,
      requestHash: existing.request_hash,
      responseStatus: existing.response_status,
      responseBody: existing.response_body,
      createdAt: existing.created_at,
    };
  }

  transaction<T>(work: (tx: TaskTransaction) => Promise<T>): Promise<T> {
    return this.sql.begin((sql) => work(new PostgresTaskTransaction(sql))) as Promise<T>;
  }

  async getTask(applicationId: string, taskId: string): Promise<TaskState | null> {
    const [task] = await this.sql<
      TaskRow[]
    >`SELECT * FROM task WHERE id = ${taskId} AND application_id = ${applicationId}`;
    return task ? loadState(this.sql, toTask(task)) : null;
  }

  async listTasks(applicationId: string, filter: TaskListFilter): Promise<TaskState[]> {
    const sql = this.sql;
    const tasks = await sql<TaskRow[]>`
      SELECT * FROM task
      WHERE application_id = ${applicationId}
        ${filter.before ? sql`AND id < ${filter.before}` : sql``}
        ${filter.externalRef ? sql`AND external_ref = ${filter.externalRef}` : sql``}
        ${filter.lifecycleStatus ? sql`AND lifecycle_status = ${filter.lifecycleStatus}` : sql``}
      ORDER BY id DESC
      LIMIT ${filter.limit}`;
    if (tasks.length === 0) return [];
    const executionIds = tasks.map((t) => t.current_execution_id);
    const [executions, steps] = await Promise.all([
      sql<ExecutionRow[]>`SELECT * FROM execution WHERE id = ANY(${executionIds}::uuid[])`,
      sql<StepRow[]>`SELECT * FROM step WHERE execution_id = ANY(${executionIds}::uuid[]) ORDER BY id`,
    ]);
    const executionById = new Map(executions.map((e) => [e.id, toExecution(e)]));
    return tasks.map((row) => ({
      task: toTask(row),
      execution: executionById.get(row.current_execution_id)!,
      steps: steps.filter((s) => s.execution_id === row.current_execution_id).map(toStep),
    }));
  }
}
