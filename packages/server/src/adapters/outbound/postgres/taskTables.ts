/** The task, execution and workflow rows a fact writes: their columns, row mappers and statements. */
import type { AclEntry, TaskState, WorkflowRecord } from '../../../core/facts/records.ts';
import type { MergedWrites } from './mergeWrites.ts';
import {
  type Column,
  insertStatement,
  type RowStatement,
  type RowValue,
  updateStatement,
} from './recordset.ts';

/** The columns of `columns` named in `names` (an UPDATE's columns are a subset of the INSERT's). */
const only = (columns: Column[], names: string[]) => columns.filter(([name]) => names.includes(name));

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
  ['parent_task_id', 'uuid'],
  ['parent_step_id', 'uuid'],
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
  parent_task_id: t.parentTaskId,
  parent_step_id: t.parentStepId,
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

/** New workflows, changed workflows, new tasks and executions, changed tasks and executions, in that order. */
const aclColumns: Column[] = [
  ['task_id', 'uuid'],
  ['principal_type', 'text'],
  ['principal_id', 'text'],
  ['permission', 'text'],
  ['created_at', 'timestamptz'],
];

const aclRowsOf = ({
  taskId,
  entries,
  createdAt,
}: {
  taskId: string;
  entries: AclEntry[];
  createdAt: Date;
}) =>
  entries.map((e) => ({
    task_id: taskId,
    principal_type: e.principalType,
    principal_id: e.principalId,
    permission: e.permission,
    created_at: createdAt,
  }));

export function pushTaskStatements(w: MergedWrites, statements: RowStatement[]): void {
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
  const aclRows = w.newAcl.flatMap(aclRowsOf);
  if (aclRows.length > 0) statements.push(insertStatement('task_acl', aclColumns, aclRows));
  const grantRows = w.aclGrants.flatMap(aclRowsOf);
  if (grantRows.length > 0)
    statements.push(
      insertStatement(
        'task_acl',
        aclColumns,
        grantRows,
        // A live entry stays as it is (its permission may be more than VIEW); a revoked one is live again,
        // with a new ACL version as any re-grant.
        `ON CONFLICT (task_id, principal_type, principal_id) DO UPDATE
           SET permission = excluded.permission, revoked_at = NULL, acl_version = task_acl.acl_version + 1
           WHERE task_acl.revoked_at IS NOT NULL`,
      ),
    );
  if (w.tasks.length > 0) statements.push(updateStatement('task', taskUpdateColumns, w.tasks.map(taskRow)));
  if (w.executions.length > 0)
    statements.push(updateStatement('execution', executionUpdateColumns, w.executions.map(executionRow)));
}
