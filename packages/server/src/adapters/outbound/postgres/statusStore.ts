import type { FactTransaction } from '../../../core/facts/ports.ts';
import type {
  AclEntry,
  AttemptRecord,
  DedupRecord,
  IdempotencyRecord,
  RealtimeRecord,
  StepRecord,
  TaskEventRecord,
  TaskState,
  WorkflowRecord,
} from '../../../core/facts/records.ts';
import type { FactWriteSet } from '../../../core/facts/writeSet.ts';
import type { HeartbeatProbe, HeartbeatUpdate, StatusStore } from '../../../core/status/ports.ts';
import { type Queryable, type Sql, type TxSql, transaction } from './database.ts';
import {
  type Column,
  insertStatement,
  type RowStatement,
  type RowValue,
  runAll,
  updateRows,
  updateStatement,
} from './recordset.ts';
import {
  type ExecutionRow,
  heartbeatDeadline,
  type StepRow,
  type TaskRow,
  toExecution,
  toStep,
  toTask,
  toWorkflow,
  type WorkflowRow,
} from './rows.ts';

/** Reads a task with its current execution and all step rows of that execution. */
/** The attempts whose execution handles hash to `hashes` (one read for a batch). */
async function attemptsByHandle(sql: Queryable, hashes: Buffer[]): Promise<AttemptRecord[]> {
  const rows = await sql<AttemptRow[]>`
    SELECT * FROM attempt
    WHERE handle_hash IN (SELECT decode(h, 'hex') FROM unnest(${hashes.map((h) => h.toString('hex'))}::text[]) AS h)`;
  return rows.map(toAttempt);
}

export async function loadTaskState(sql: Queryable, task: TaskRow, withAcl = false): Promise<TaskState> {
  const [[execution], steps, acl] = await Promise.all([
    sql<ExecutionRow[]>`SELECT * FROM execution WHERE id = ${task.current_execution_id}`,
    sql<StepRow[]>`SELECT * FROM step WHERE execution_id = ${task.current_execution_id} ORDER BY id`,
    withAcl ? readAcl(sql, task.id) : Promise.resolve(undefined),
  ]);
  if (!execution) throw new Error(`task ${task.id} has no execution ${task.current_execution_id}`);
  return {
    task: toTask(task),
    execution: toExecution(execution),
    steps: steps.map(toStep),
    ...(acl ? { acl } : {}),
  };
}

async function readAcl(sql: Queryable, taskId: string): Promise<AclEntry[]> {
  const rows = await sql<
    { principal_type: AclEntry['principalType']; principal_id: string; permission: AclEntry['permission'] }[]
  >`
    SELECT principal_type, principal_id, permission FROM task_acl WHERE task_id = ${taskId} AND revoked_at IS NULL`;
  return rows.map((r) => ({
    principalType: r.principal_type,
    principalId: r.principal_id,
    permission: r.permission,
  }));
}

/**
 * The steps of the tasks' current executions ($1: task ids). Driven by the task ids on step's task
 * index whatever the statistics say: joined on the execution id alone, the plan a new database made
 * before its first ANALYZE hashed a scan of the whole step table (5 ms per batch at 11,000 steps).
 */
export const currentStepsOfTasks = `
  SELECT s.* FROM step s
  WHERE s.task_id = ANY($1::uuid[])
    AND s.execution_id IN (SELECT current_execution_id FROM task WHERE id = ANY($1::uuid[]))
  ORDER BY s.id`;

const stepColumns: Column[] = [
  ['id', 'uuid'],
  ['task_id', 'uuid'],
  ['execution_id', 'uuid'],
  ['step_key', 'text'],
  ['attempt', 'integer'],
  ['client_step_key', 'text'],
  ['capability', 'text'],
  ['capability_version', 'text'],
  ['operation_code', 'text'],
  ['operation_definition_version', 'integer'],
  ['expected_producer', 'text'],
  ['failure_policy', 'text'],
  ['depends_on', 'text[]'],
  ['dynamic', 'boolean'],
  ['parent_attempt_id', 'uuid'],
  ['depth', 'integer'],
  ['display_name', 'text'],
  ['attempt_id', 'uuid'],
  ['current', 'boolean'],
  ['status', 'text'],
  ['business_status', 'text'],
  ['phase_code', 'text'],
  ['phase_label', 'text'],
  ['progress', 'jsonb'],
  ['health', 'text'],
  ['source_seqs', 'jsonb'],
  ['heartbeat_interval_seconds', 'integer'],
  ['heartbeat_timeout_seconds', 'integer'],
  ['last_heartbeat_seq', 'bigint'],
  ['last_heartbeat_at', 'timestamptz'],
  ['heartbeat_deadline_at', 'timestamptz'],
  ['stale_since', 'timestamptz'],
  ['data_schema', 'text'],
  ['state_data', 'jsonb'],
  ['started_at', 'timestamptz'],
  ['finished_at', 'timestamptz'],
  ['duration_ms', 'bigint'],
  ['duration_source', 'text'],
  ['error', 'jsonb'],
  ['version', 'bigint'],
  ['created_at', 'timestamptz'],
  ['updated_at', 'timestamptz'],
];

/** What a fact may change on an existing step row (its identity and definition stay). */
const stepUpdateColumns = stepColumns.filter(
  ([name]) =>
    ![
      'task_id',
      'execution_id',
      'step_key',
      'attempt',
      'client_step_key',
      'capability',
      'capability_version',
      'operation_code',
      'failure_policy',
      'depends_on',
      'dynamic',
      'parent_attempt_id',
      'depth',
      'display_name',
      'created_at',
    ].includes(name),
);

const stepRow = (s: StepRecord): Record<string, RowValue> => ({
  id: s.id,
  task_id: s.taskId,
  execution_id: s.executionId,
  step_key: s.key,
  attempt: s.attempt,
  client_step_key: s.clientStepKey,
  capability: s.capability,
  capability_version: s.capabilityVersion,
  operation_code: s.operationCode,
  operation_definition_version: s.operationDefinitionVersion,
  expected_producer: s.expectedProducer,
  failure_policy: s.failurePolicy,
  depends_on: s.dependsOn,
  dynamic: s.dynamic,
  parent_attempt_id: s.parentAttemptId,
  depth: s.depth,
  display_name: s.displayName,
  attempt_id: s.attemptId,
  current: s.current,
  status: s.status,
  business_status: s.businessStatus,
  phase_code: s.phaseCode,
  phase_label: s.phaseLabel,
  progress: s.progress ?? null,
  health: s.health,
  source_seqs: s.sourceSeqs,
  heartbeat_interval_seconds: s.heartbeatIntervalSeconds,
  heartbeat_timeout_seconds: s.heartbeatTimeoutSeconds,
  last_heartbeat_seq: s.lastHeartbeatSeq,
  last_heartbeat_at: s.lastHeartbeatAt,
  heartbeat_deadline_at: heartbeatDeadline(s),
  stale_since: s.staleSince,
  data_schema: s.dataSchema,
  state_data: (s.stateData ?? null) as RowValue,
  started_at: s.startedAt,
  finished_at: s.finishedAt,
  duration_ms: s.durationMs,
  duration_source: s.durationSource,
  error: s.error ?? null,
  version: s.version,
  created_at: s.createdAt,
  updated_at: s.updatedAt,
});

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
];

const revocationColumns: Column[] = [
  ['id', 'uuid'],
  ['revoked_at', 'timestamptz'],
];
const commandAckColumns: Column[] = [
  ['id', 'uuid'],
  ['worker_id', 'uuid'],
  ['acked_at', 'timestamptz'],
];
const requestClosingColumns: Column[] = [
  ['step_id', 'uuid'],
  ['status', 'text'],
];
const dedupColumns: Column[] = [
  ['event_id', 'uuid'],
  ['task_id', 'uuid'],
  ['payload_hash', 'text'],
  ['result', 'jsonb'],
  ['created_at', 'timestamptz'],
];

const schedulingRequestColumns: Column[] = [
  ['id', 'uuid'],
  ['task_id', 'uuid'],
  ['step_id', 'uuid'],
  ['priority', 'integer'],
  ['status', 'text'],
  ['available_at', 'timestamptz'],
  ['created_at', 'timestamptz'],
  ['updated_at', 'timestamptz'],
];

const schedulingRequestDeferColumns: Column[] = [
  ['id', 'uuid'],
  ['reasons', 'jsonb'],
  ['available_at', 'timestamptz'],
  ['updated_at', 'timestamptz'],
];

const workerCommandColumns: Column[] = [
  ['id', 'uuid'],
  ['worker_id', 'uuid'],
  ['type', 'text'],
  ['payload', 'jsonb'],
  ['created_at', 'timestamptz'],
];

const timerColumns: Column[] = [
  ['id', 'uuid'],
  ['kind', 'text'],
  ['task_id', 'uuid'],
  ['step_id', 'uuid'],
  ['payload', 'jsonb'],
  ['available_at', 'timestamptz'],
  ['created_at', 'timestamptz'],
];

const callbackColumns: Column[] = [
  ['id', 'uuid'],
  ['application_id', 'uuid'],
  ['task_id', 'uuid'],
  ['execution_id', 'uuid'],
  ['sequence', 'integer'],
  ['event_id', 'uuid'],
  ['event_type', 'text'],
  ['url', 'text'],
  ['payload', 'jsonb'],
  ['available_at', 'timestamptz'],
  ['created_at', 'timestamptz'],
];

const timelineColumns: Column[] = [
  ['id', 'uuid'],
  ['task_id', 'uuid'],
  ['execution_id', 'uuid'],
  ['kind', 'text'],
  ['message', 'text'],
  ['data', 'jsonb'],
  ['at', 'timestamptz'],
];

/** The columns of `columns` named in `names` (an UPDATE's columns are a subset of the INSERT's). */
const only = (columns: Column[], names: string[]) => columns.filter(([name]) => names.includes(name));

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

const workflowColumns: Column[] = [
  ['id', 'uuid'],
  ['tenant_id', 'uuid'],
  ['application_id', 'uuid'],
  ['client_workflow_key', 'text'],
  ['owner_id', 'text'],
  ['title', 'text'],
  ['workflow_type', 'text'],
  ['lifecycle_status', 'text'],
  ['version', 'bigint'],
  ['task_count', 'integer'],
  ['task_counts', 'jsonb'],
  ['request_hash', 'text'],
  ['created_at', 'timestamptz'],
  ['updated_at', 'timestamptz'],
];

const workflowUpdateColumns = only(workflowColumns, [
  'id',
  'lifecycle_status',
  'version',
  'task_count',
  'task_counts',
  'updated_at',
]);

const workflowRow = (w: WorkflowRecord): Record<string, RowValue> => ({
  id: w.id,
  tenant_id: w.tenantId,
  application_id: w.applicationId,
  client_workflow_key: w.clientWorkflowKey,
  owner_id: w.ownerId,
  title: w.title,
  workflow_type: w.workflowType,
  lifecycle_status: w.lifecycleStatus,
  version: w.version,
  task_count: w.taskCount,
  task_counts: w.taskCounts,
  request_hash: w.requestHash,
  created_at: w.createdAt,
  updated_at: w.updatedAt,
});

const taskColumns: Column[] = [
  ['id', 'uuid'],
  ['tenant_id', 'uuid'],
  ['application_id', 'uuid'],
  ['workflow_id', 'uuid'],
  ['client_task_key', 'text'],
  ['workflow_definition_id', 'uuid'],
  ['workflow_name', 'text'],
  ['workflow_version', 'text'],
  ['name', 'text'],
  ['external_ref', 'text'],
  ['input', 'jsonb'],
  ['callback_url', 'text'],
  ['priority', 'integer'],
  ['owner_id', 'text'],
  ['task_type', 'text'],
  ['product_id', 'text'],
  ['status_definition_version', 'integer'],
  ['lifecycle_status', 'text'],
  ['business_status', 'text'],
  ['health', 'text'],
  ['failure', 'jsonb'],
  ['coordinator_source_seq', 'bigint'],
  ['dynamic_policy', 'jsonb'],
  ['dynamic_step_count', 'integer'],
  ['version', 'bigint'],
  ['current_execution_id', 'uuid'],
  ['created_at', 'timestamptz'],
  ['updated_at', 'timestamptz'],
  ['started_at', 'timestamptz'],
  ['finished_at', 'timestamptz'],
  ['duration_ms', 'bigint'],
  ['events_pruned_before', 'bigint'],
];

/** What a fact may change on an existing task row. */
const taskUpdateColumns = only(taskColumns, [
  'id',
  'task_type',
  'product_id',
  'status_definition_version',
  'lifecycle_status',
  'business_status',
  'health',
  'failure',
  'coordinator_source_seq',
  'dynamic_step_count',
  'version',
  'current_execution_id',
  'updated_at',
  'started_at',
  'finished_at',
  'duration_ms',
]);

const taskRow = (t: TaskState['task']): Record<string, RowValue> => ({
  id: t.id,
  tenant_id: t.tenantId,
  application_id: t.applicationId,
  workflow_id: t.workflowId,
  client_task_key: t.clientTaskKey,
  workflow_definition_id: t.workflowDefinitionId,
  workflow_name: t.workflowName,
  workflow_version: t.workflowVersion,
  name: t.name,
  external_ref: t.externalRef,
  input: t.input as RowValue,
  callback_url: t.callbackUrl,
  priority: t.priority,
  owner_id: t.ownerId,
  task_type: t.taskType,
  product_id: t.productId,
  status_definition_version: t.statusDefinitionVersion,
  lifecycle_status: t.lifecycleStatus,
  business_status: t.businessStatus,
  health: t.health,
  failure: (t.failure ?? null) as RowValue,
  coordinator_source_seq: t.coordinatorSourceSeq,
  dynamic_policy: t.dynamicPolicy as RowValue,
  dynamic_step_count: t.dynamicStepCount,
  version: t.version,
  current_execution_id: t.currentExecutionId,
  created_at: t.createdAt,
  updated_at: t.updatedAt,
  started_at: t.startedAt,
  finished_at: t.finishedAt,
  duration_ms: t.durationMs,
  events_pruned_before: t.eventsPrunedBefore,
});

const executionColumns: Column[] = [
  ['id', 'uuid'],
  ['task_id', 'uuid'],
  ['number', 'integer'],
  ['status', 'text'],
  ['progress', 'smallint'],
  ['snapshot', 'jsonb'],
  ['version', 'bigint'],
  ['callback_sequence', 'integer'],
  ['created_at', 'timestamptz'],
  ['started_at', 'timestamptz'],
  ['completed_at', 'timestamptz'],
  ['updated_at', 'timestamptz'],
];

const executionUpdateColumns = only(executionColumns, [
  'id',
  'status',
  'progress',
  'version',
  'started_at',
  'completed_at',
  'updated_at',
  'callback_sequence',
]);

const executionRow = (e: TaskState['execution']): Record<string, RowValue> => ({
  id: e.id,
  task_id: e.taskId,
  number: e.number,
  status: e.status,
  progress: e.progress,
  snapshot: e.snapshot as RowValue,
  version: e.version,
  callback_sequence: e.callbackSequence,
  created_at: e.createdAt,
  started_at: e.startedAt,
  completed_at: e.completedAt,
  updated_at: e.updatedAt,
});

const outboxColumns: Column[] = [
  ['id', 'uuid'],
  ['tenant_id', 'uuid'],
  ['application_id', 'uuid'],
  ['aggregate_id', 'uuid'],
  ['event_type', 'text'],
  ['payload', 'jsonb'],
  ['available_at', 'timestamptz'],
  ['created_at', 'timestamptz'],
];

const realtimeColumns: Column[] = [
  ['id', 'uuid'],
  ['tenant_id', 'uuid'],
  ['aggregate_type', 'text'],
  ['aggregate_id', 'uuid'],
  ['aggregate_version', 'bigint'],
  ['channel', 'text'],
  ['projection', 'text'],
  ['payload', 'jsonb'],
  ['available_at', 'timestamptz'],
  ['created_at', 'timestamptz'],
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
});

/**
 * Opens a status transaction. Its statements find rows by key, so each is planned once per connection
 * (a generic plan) instead of at every execution: for `= ANY($1)` over a batch's ids PostgreSQL
 * otherwise re-plans each time, and planning cost more than running. Sequential scans are ruled out
 * because a generic plan made while a table is new (no statistics yet) would scan it whole for as long
 * as the plan is kept; with them off, every key lookup plans as an index scan from the start.
 */
export const beginStatusTransaction =
  'BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL enable_seqscan = off';

class PostgresStatusTransaction implements FactTransaction {
  private readonly atCommit: FactWriteSet[] = [];

  /**
   * `tx` is the open transaction, or null for a write-only one: it may not read, and its writes go out
   * through `writer` as one statement, atomic on its own.
   */
  constructor(
    private readonly tx: TxSql | null,
    private readonly writer: Queryable,
  ) {}

  private get sql(): TxSql {
    if (!this.tx) throw new Error('a write-only transaction cannot read');
    return this.tx;
  }

  writeAtCommit(writes: FactWriteSet[]): void {
    this.atCommit.push(...writes);
  }

  /** Starts the writes kept for the commit; the caller sends COMMIT right behind them. */
  sendAtCommit(): Promise<unknown> | null {
    return this.atCommit.length > 0 ? this.send(this.atCommit.splice(0)) : null;
  }

  async claimSchedulingRequests(now: Date, limit: number) {
    const rows = await this.sql<{ id: string; task_id: string; step_id: string }[]>`
      SELECT id, task_id, step_id FROM scheduling_request
      WHERE status = 'PENDING' AND available_at <= ${now}
      ORDER BY priority DESC, created_at
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED`;
    return rows.map((r) => ({ id: r.id, taskId: r.task_id, stepId: r.step_id }));
  }

  async deferSchedulingRequests(requests: { id: string; reasons: string[] }[], availableAt: Date) {
    await updateRows(
      this.sql,
      'scheduling_request',
      schedulingRequestDeferColumns,
      requests.map((r) => ({
        id: r.id,
        reasons: r.reasons,
        available_at: availableAt,
        updated_at: availableAt,
      })),
    );
  }

  async advisoryLocks(keys: string[]) {
    if (keys.length === 0) return;
    await this.sql`
      SELECT pg_advisory_xact_lock(hashtext(k)) FROM (SELECT k FROM unnest(${keys}::text[]) AS k ORDER BY k) AS sorted`;
  }

  async lockTask(taskId: string): Promise<TaskState | null> {
    const [task] = await this.sql<TaskRow[]>`SELECT * FROM task WHERE id = ${taskId} FOR UPDATE`;
    return task ? loadTaskState(this.sql, task, true) : null;
  }

  async lockTaskIfFree(taskId: string): Promise<TaskState | null> {
    const [task] = await this.sql<TaskRow[]>`SELECT * FROM task WHERE id = ${taskId} FOR UPDATE SKIP LOCKED`;
    return task ? loadTaskState(this.sql, task, true) : null;
  }

  async lockTasks(taskIds: string[], options: { workflows?: boolean } = {}) {
    const sql = this.sql;
    // Sent together; each statement runs after the lock statement, so all read the locked state.
    const [tasks, executions, steps, acl, workflows] = await Promise.all([
      sql<TaskRow[]>`SELECT * FROM task WHERE id = ANY(${taskIds}::uuid[]) ORDER BY id FOR UPDATE`,
      sql<ExecutionRow[]>`
        SELECT e.* FROM execution e JOIN task t ON e.id = t.current_execution_id WHERE t.id = ANY(${taskIds}::uuid[])`,
      sql.unsafe<StepRow[]>(currentStepsOfTasks, [taskIds], { prepare: true }),
      sql<
        {
          task_id: string;
          principal_type: AclEntry['principalType'];
          principal_id: string;
          permission: AclEntry['permission'];
        }[]
      >`
        SELECT task_id, principal_type, principal_id, permission FROM task_acl
        WHERE task_id = ANY(${taskIds}::uuid[]) AND revoked_at IS NULL`,
      // Workflows after tasks, in id order: the order every transaction locks them in.
      options.workflows
        ? sql<WorkflowRow[]>`
            SELECT * FROM workflow WHERE id IN (SELECT workflow_id FROM task WHERE id = ANY(${taskIds}::uuid[]))
            ORDER BY id FOR UPDATE`
        : [],
    ]);
    const executionById = new Map(executions.map((e) => [e.id, e]));
    const states = tasks.map((task) => {
      const execution = executionById.get(task.current_execution_id);
      if (!execution) throw new Error(`task ${task.id} has no execution ${task.current_execution_id}`);
      return {
        task: toTask(task),
        execution: toExecution(execution),
        steps: steps.filter((s) => s.task_id === task.id).map(toStep),
        acl: acl
          .filter((a) => a.task_id === task.id)
          .map((a) => ({
            principalType: a.principal_type,
            principalId: a.principal_id,
            permission: a.permission,
          })),
      };
    });
    return { tasks: states, workflows: workflows.map(toWorkflow) };
  }

  async lockWorkflows(workflowIds: string[]): Promise<WorkflowRecord[]> {
    const rows = await this.sql<WorkflowRow[]>`
      SELECT * FROM workflow WHERE id = ANY(${workflowIds}::uuid[]) ORDER BY id FOR UPDATE`;
    return rows.map(toWorkflow);
  }

  async lockWorkflow(workflowId: string): Promise<WorkflowRecord | null> {
    const [row] = await this.sql<WorkflowRow[]>`SELECT * FROM workflow WHERE id = ${workflowId} FOR UPDATE`;
    return row ? toWorkflow(row) : null;
  }

  async findWorkflowByKey(applicationId: string, key: string): Promise<WorkflowRecord | null> {
    const [row] = await this.sql<WorkflowRow[]>`
      SELECT * FROM workflow WHERE application_id = ${applicationId} AND client_workflow_key = ${key}`;
    return row ? toWorkflow(row) : null;
  }

  async findTaskIdByClientKey(workflowId: string, clientTaskKey: string): Promise<string | null> {
    const [row] = await this.sql<{ id: string }[]>`
      SELECT id FROM task WHERE workflow_id = ${workflowId} AND client_task_key = ${clientTaskKey}`;
    return row?.id ?? null;
  }

  async findDedup(eventId: string): Promise<DedupRecord | null> {
    const [row] = await this.sql<
      {
        event_id: string;
        task_id: string;
        payload_hash: string;
        result: Record<string, unknown>;
        created_at: Date;
      }[]
    >`
      SELECT * FROM event_dedup WHERE event_id = ${eventId}`;
    return row
      ? {
          eventId: row.event_id,
          taskId: row.task_id,
          payloadHash: row.payload_hash,
          result: row.result,
          createdAt: row.created_at,
        }
      : null;
  }

  async findDedups(eventIds: string[]): Promise<DedupRecord[]> {
    const rows = await this.sql<
      {
        event_id: string;
        task_id: string;
        payload_hash: string;
        result: Record<string, unknown>;
        created_at: Date;
      }[]
    >`
      SELECT * FROM event_dedup WHERE event_id = ANY(${eventIds}::uuid[])`;
    return rows.map((row) => ({
      eventId: row.event_id,
      taskId: row.task_id,
      payloadHash: row.payload_hash,
      result: row.result,
      createdAt: row.created_at,
    }));
  }

  async findAttempt(attemptId: string): Promise<AttemptRecord | null> {
    const [row] = await this.sql<AttemptRow[]>`SELECT * FROM attempt WHERE id = ${attemptId}`;
    return row ? toAttempt(row) : null;
  }

  async findAttemptByHandle(handleHash: Buffer): Promise<AttemptRecord | null> {
    const [row] = await this.sql<AttemptRow[]>`SELECT * FROM attempt WHERE handle_hash = ${handleHash}`;
    return row ? toAttempt(row) : null;
  }

  findAttemptsByHandle(hashes: Buffer[]): Promise<AttemptRecord[]> {
    return attemptsByHandle(this.sql, hashes);
  }

  async acl(taskId: string): Promise<AclEntry[]> {
    const rows = await this.sql<
      {
        principal_type: AclEntry['principalType'];
        principal_id: string;
        permission: AclEntry['permission'];
      }[]
    >`
      SELECT principal_type, principal_id, permission FROM task_acl WHERE task_id = ${taskId} AND revoked_at IS NULL`;
    return rows.map((r) => ({
      principalType: r.principal_type,
      principalId: r.principal_id,
      permission: r.permission,
    }));
  }

  async countRegistrationsSince(taskId: string, since: Date): Promise<number> {
    const [row] = await this.sql<{ n: bigint }[]>`
      SELECT count(*) AS n FROM step WHERE task_id = ${taskId} AND dynamic AND created_at > ${since}`;
    return Number(row?.n ?? 0);
  }

  async findIdempotency(
    principal: string,
    operation: string,
    key: string,
  ): Promise<IdempotencyRecord | null> {
    const [row] = await this.sql<
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

  // Written at once: only inside a transaction (a write-only one writes at commit, or not at all).
  async write(w: FactWriteSet): Promise<void> {
    await this.writeAll([w]);
  }

  async writeAll(writes: FactWriteSet[]): Promise<void> {
    const sql = this.sql;
    const statements = factStatements(writes);
    if (statements.length > 0) await runAll(sql, statements);
  }

  /** Starts the statement that applies `writes` (one, whatever the tables) without waiting for it. */
  private send(writes: FactWriteSet[]): Promise<unknown> {
    const statements = factStatements(writes);
    return statements.length > 0 ? runAll(this.writer, statements).execute() : Promise.resolve();
  }
}

/** The statements that apply `writes`: one per table, each row once, in its last state. */
export function factStatements(writes: FactWriteSet[]): RowStatement[] {
  const w = mergeWrites(writes);
  // Revocations carry the time of the first fact (the injected clock).
  const committedAt = w.events[0]?.receivedAt ?? null;
  const statements: RowStatement[] = [];
  // No ON CONFLICT: a key already taken fails the statement (the caller answers with a replay).
  if (w.idempotency)
    statements.push(insertStatement('idempotency', idempotencyColumns, [idempotencyRow(w.idempotency)]));
  if (w.newWorkflows.length > 0)
    statements.push(insertStatement('workflow', workflowColumns, w.newWorkflows.map(workflowRow)));
  if (w.workflows.length > 0)
    statements.push(updateStatement('workflow', workflowUpdateColumns, w.workflows.map(workflowRow)));
  if (w.newTasks.length > 0)
    statements.push(
      insertStatement(
        'task',
        taskColumns,
        w.newTasks.map((t) => taskRow(t.task)),
      ),
    );
  const newExecutions = [...w.newTasks.map((t) => t.execution), ...w.newExecutions];
  if (newExecutions.length > 0)
    statements.push(insertStatement('execution', executionColumns, newExecutions.map(executionRow)));
  if (w.tasks.length > 0) statements.push(updateStatement('task', taskUpdateColumns, w.tasks.map(taskRow)));
  if (w.executions.length > 0)
    statements.push(updateStatement('execution', executionUpdateColumns, w.executions.map(executionRow)));
  if (w.newSteps.length > 0) statements.push(insertStatement('step', stepColumns, w.newSteps.map(stepRow)));
  if (w.steps.length > 0) statements.push(updateStatement('step', stepUpdateColumns, w.steps.map(stepRow)));
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
  if (w.outbox.length > 0) {
    statements.push(
      insertStatement(
        'outbox_event',
        outboxColumns,
        w.outbox.map((o) => ({
          id: o.id,
          tenant_id: o.tenantId,
          application_id: o.applicationId,
          aggregate_id: o.aggregateId,
          event_type: o.eventType,
          payload: o.payload as RowValue,
          available_at: o.createdAt,
          created_at: o.createdAt,
        })),
      ),
    );
  }
  if (w.realtime.length > 0) {
    statements.push(
      insertStatement(
        'realtime_outbox',
        realtimeColumns,
        w.realtime.map((r) => ({
          id: r.id,
          tenant_id: r.tenantId,
          aggregate_type: r.aggregateType,
          aggregate_id: r.aggregateId,
          aggregate_version: r.aggregateVersion,
          channel: r.channel,
          projection: r.projection,
          payload: r.payload as RowValue,
          available_at: r.availableAt ?? r.createdAt,
          created_at: r.createdAt,
        })),
      ),
    );
  }
  // A request closed by the batch that opened it is written closed; the others are closed by step.
  // A step closed twice keeps its first status, as two UPDATEs in a row would.
  const closing = new Map<string, string>();
  for (const [status, stepIds] of w.closeSchedulingRequests)
    for (const stepId of stepIds) if (!closing.has(stepId)) closing.set(stepId, status);
  if (w.schedulingRequests.length > 0) {
    statements.push(
      insertStatement(
        'scheduling_request',
        schedulingRequestColumns,
        w.schedulingRequests.map((r) => {
          const status = closing.get(r.stepId) ?? 'PENDING';
          closing.delete(r.stepId);
          return {
            id: r.id,
            task_id: r.taskId,
            step_id: r.stepId,
            priority: r.priority,
            status,
            available_at: r.availableAt,
            created_at: r.createdAt,
            updated_at: r.createdAt,
          };
        }),
        'ON CONFLICT (step_id) DO NOTHING',
      ),
    );
  }
  if (closing.size > 0) {
    statements.push(
      updateStatement(
        'scheduling_request',
        requestClosingColumns,
        [...closing].map(([step_id, status]) => ({ step_id, status })),
        {
          match: 'step_id',
          assignments: 'status = x.status, updated_at = now()',
          where: "scheduling_request.status = 'PENDING'",
        },
      ),
    );
  }
  if (w.workerCommands.length > 0) {
    statements.push(
      insertStatement(
        'worker_command',
        workerCommandColumns,
        w.workerCommands.map((c) => ({
          id: c.id,
          worker_id: c.workerId,
          type: c.type,
          payload: c.payload,
          created_at: c.createdAt,
        })),
      ),
    );
  }
  if (w.commandAcks.size > 0) {
    statements.push(
      updateStatement('worker_command', commandAckColumns, [...w.commandAcks.values()], {
        assignments: 'acked_at = coalesce(worker_command.acked_at, x.acked_at)',
        where: 'worker_command.worker_id = x.worker_id',
      }),
    );
  }
  if (w.timers.length > 0) {
    statements.push(
      insertStatement(
        '"timer"',
        timerColumns,
        w.timers.map((t) => ({
          id: t.id,
          kind: t.kind,
          task_id: t.taskId,
          step_id: t.stepId,
          payload: t.payload,
          available_at: t.availableAt,
          created_at: t.createdAt,
        })),
      ),
    );
  }
  if (w.callbacks.length > 0) {
    statements.push(
      insertStatement(
        'callback_delivery',
        callbackColumns,
        w.callbacks.map((c) => ({
          id: c.id,
          application_id: c.applicationId,
          task_id: c.taskId,
          execution_id: c.executionId,
          sequence: c.sequence,
          event_id: c.eventId,
          event_type: c.eventType,
          url: c.url,
          payload: c.payload,
          available_at: c.createdAt,
          created_at: c.createdAt,
        })),
      ),
    );
  }
  if (w.timeline.length > 0) {
    statements.push(
      insertStatement(
        'timeline',
        timelineColumns,
        w.timeline.map((m) => ({
          id: m.id,
          task_id: m.taskId,
          execution_id: m.executionId,
          kind: m.kind,
          message: m.message,
          data: m.data,
          at: m.at,
        })),
      ),
    );
  }
  return statements;
}

/**
 * Several facts of one transaction as one set of rows per table, applied in their order: a row written
 * by two facts is sent once in its last state (an inserted row that a later fact changed is inserted
 * as changed), lists are concatenated.
 */
export function mergeWrites(writes: FactWriteSet[]) {
  const newWorkflows = new Map<string, WorkflowRecord>();
  const workflows = new Map<string, WorkflowRecord>();
  const newTasks = new Map<string, { task: TaskState['task']; execution: TaskState['execution'] }>();
  const newExecutions = new Map<string, TaskState['execution']>();
  const tasks = new Map<string, TaskState['task']>();
  const executions = new Map<string, TaskState['execution']>();
  const newSteps = new Map<string, StepRecord>();
  const steps = new Map<string, StepRecord>();
  const attempts = new Map<string, AttemptRecord>();
  const revoked = new Set<string>();
  const closed = new Map<'DISPATCHED' | 'CANCELED', string[]>();
  const commandAcks = new Map<string, { id: string; worker_id: string; acked_at: Date }>();
  const merged = {
    idempotency: undefined as FactWriteSet['idempotency'],
    events: [] as TaskEventRecord[],
    dedup: [] as NonNullable<FactWriteSet['dedup']>,
    outbox: [] as FactWriteSet['outbox'],
    realtime: [] as RealtimeRecord[],
    schedulingRequests: [] as NonNullable<FactWriteSet['schedulingRequests']>,
    workerCommands: [] as NonNullable<FactWriteSet['workerCommands']>,
    timers: [] as NonNullable<FactWriteSet['timers']>,
    callbacks: [] as NonNullable<FactWriteSet['callbacks']>,
    timeline: [] as NonNullable<FactWriteSet['timeline']>,
  };
  for (const w of writes) {
    if (w.idempotency) {
      if (merged.idempotency) throw new Error('one transaction claims one idempotency key');
      merged.idempotency = w.idempotency;
    }
    if (w.newWorkflow) newWorkflows.set(w.newWorkflow.id, w.newWorkflow);
    if (w.workflow) {
      if (newWorkflows.has(w.workflow.id)) newWorkflows.set(w.workflow.id, w.workflow);
      else workflows.set(w.workflow.id, w.workflow);
    }
    if (w.newTask) newTasks.set(w.newTask.task.id, { ...w.newTask });
    if (w.newExecution) newExecutions.set(w.newExecution.id, w.newExecution);
    if (w.task) {
      const created = newTasks.get(w.task.id);
      if (created) created.task = w.task;
      else tasks.set(w.task.id, w.task);
    }
    if (w.execution) {
      const created = newTasks.get(w.execution.taskId);
      if (created?.execution.id === w.execution.id) created.execution = w.execution;
      else if (newExecutions.has(w.execution.id)) newExecutions.set(w.execution.id, w.execution);
      else executions.set(w.execution.id, w.execution);
    }
    for (const step of w.newSteps ?? []) newSteps.set(step.id, step);
    for (const step of w.steps ?? []) {
      if (newSteps.has(step.id)) newSteps.set(step.id, step);
      else steps.set(step.id, step);
    }
    for (const attempt of w.attempts ?? []) attempts.set(attempt.id, attempt);
    for (const id of w.revokeAttemptIds ?? []) revoked.add(id);
    if (w.commandAcks) {
      const { workerId, commandIds, at } = w.commandAcks;
      for (const id of commandIds)
        if (!commandAcks.has(id)) commandAcks.set(id, { id, worker_id: workerId, acked_at: at });
    }
    if (w.closeSchedulingRequests && w.closeSchedulingRequests.stepIds.length > 0) {
      const list = closed.get(w.closeSchedulingRequests.status) ?? [];
      list.push(...w.closeSchedulingRequests.stepIds);
      closed.set(w.closeSchedulingRequests.status, list);
    }
    merged.events.push(...w.events);
    merged.dedup.push(...(w.dedup ?? []));
    merged.outbox.push(...w.outbox);
    merged.realtime.push(...w.realtime);
    merged.schedulingRequests.push(...(w.schedulingRequests ?? []));
    merged.workerCommands.push(...(w.workerCommands ?? []));
    merged.timers.push(...(w.timers ?? []));
    merged.callbacks.push(...(w.callbacks ?? []));
    merged.timeline.push(...(w.timeline ?? []));
  }
  return {
    ...merged,
    newWorkflows: [...newWorkflows.values()],
    workflows: [...workflows.values()],
    newTasks: [...newTasks.values()],
    newExecutions: [...newExecutions.values()],
    tasks: [...tasks.values()],
    executions: [...executions.values()],
    newSteps: [...newSteps.values()],
    steps: [...steps.values()],
    attempts: [...attempts.values()],
    revokeAttemptIds: [...revoked],
    closeSchedulingRequests: [...closed],
    commandAcks,
  };
}

const retryableCodes = new Set(['40P01', '40001']);

export class PostgresStatusStore implements StatusStore {
  constructor(private readonly sql: Sql) {}

  async renewLeases(updates: HeartbeatUpdate[], now: Date): Promise<Set<string>> {
    const rows = await this.sql<{ attempt_id: string }[]>`
      UPDATE step SET last_heartbeat_seq = x.seq, last_heartbeat_at = ${now},
                      heartbeat_deadline_at = ${now}::timestamptz + make_interval(secs => step.heartbeat_timeout_seconds)
      FROM (SELECT DISTINCT ON (attempt_id) attempt_id, seq
            FROM unnest(${updates.map((u) => u.attemptId)}::uuid[], ${updates.map((u) => String(u.heartbeatSeq))}::bigint[])
                 AS u(attempt_id, seq)
            ORDER BY attempt_id, seq DESC) AS x
      WHERE step.attempt_id = x.attempt_id AND step.status = 'RUNNING' AND step.health = 'HEALTHY' AND step.current
        AND step.last_heartbeat_seq < x.seq
      RETURNING step.attempt_id`;
    return new Set(rows.map((r) => r.attempt_id));
  }

  async probeAttempts(attemptIds: string[]): Promise<HeartbeatProbe[]> {
    const rows = await this.sql<
      {
        attempt_id: string;
        task_id: string;
        status: string;
        health: string;
        current: boolean;
        last_heartbeat_seq: bigint;
        execution_is_current: boolean;
      }[]
    >`
      SELECT s.attempt_id, s.task_id, s.status, s.health, s.current, s.last_heartbeat_seq,
             (t.current_execution_id = s.execution_id) AS execution_is_current
      FROM step s JOIN task t ON t.id = s.task_id
      WHERE s.attempt_id = ANY(${attemptIds}::uuid[])`;
    return rows.map((r) => ({
      attemptId: r.attempt_id,
      taskId: r.task_id,
      status: r.status,
      health: r.health,
      current: r.current,
      lastHeartbeatSeq: r.last_heartbeat_seq,
      executionIsCurrent: r.execution_is_current,
    }));
  }

  attemptsByHandle(hashes: Buffer[]): Promise<AttemptRecord[]> {
    return attemptsByHandle(this.sql, hashes);
  }

  async attemptsById(ids: string[]): Promise<AttemptRecord[]> {
    if (ids.length === 0) return [];
    const rows = await this.sql<AttemptRow[]>`SELECT * FROM attempt WHERE id = ANY(${ids}::uuid[])`;
    return rows.map(toAttempt);
  }

  async overdueTasks(now: Date, limit: number): Promise<string[]> {
    const rows = await this.sql<{ task_id: string }[]>`
      SELECT DISTINCT task_id FROM (
        SELECT task_id FROM step
        WHERE status = 'RUNNING' AND health = 'HEALTHY' AND heartbeat_timeout_seconds IS NOT NULL
          AND heartbeat_deadline_at <= ${now}
        ORDER BY heartbeat_deadline_at LIMIT ${limit}) AS due`;
    return rows.map((r) => r.task_id);
  }

  async transaction<T>(
    work: (tx: FactTransaction) => Promise<T>,
    options: { writeOnly?: boolean } = {},
  ): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await (options.writeOnly ? this.writeOnly(work) : this.once(work));
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (attempt >= 5 || !code || !retryableCodes.has(code)) throw error;
      }
    }
  }

  /**
   * One transaction in two round trips: BEGIN goes out with the first reads, and the writes the session
   * kept for the commit go out as one statement with COMMIT right behind it. If that statement fails,
   * the transaction is aborted and COMMIT rolls it back (PostgreSQL answers ROLLBACK, not an error), so
   * its own failure is awaited after.
   */
  private async once<T>(work: (tx: FactTransaction) => Promise<T>): Promise<T> {
    let last: Promise<unknown> | null = null;
    const value = await transaction(
      this.sql,
      async (sql) => {
        const tx = new PostgresStatusTransaction(sql, sql);
        const result = await work(tx);
        last = tx.sendAtCommit();
        // Observed below, once COMMIT has answered.
        last?.catch(() => {});
        return result;
      },
      beginStatusTransaction,
    );
    if (last) await last;
    return value;
  }

  /** No BEGIN, no COMMIT: the writes are one statement, so one round trip (a create's). */
  private async writeOnly<T>(work: (tx: FactTransaction) => Promise<T>): Promise<T> {
    const tx = new PostgresStatusTransaction(null, this.sql);
    const value = await work(tx);
    await tx.sendAtCommit();
    return value;
  }
}
