/**
 * The reads a fact makes inside its transaction, most of them locks: the task state (a task with its
 * current execution, that execution's steps and the task's ACL), workflows, and advisory locks.
 */

import type { WorkerLoad } from '../../../core/facts/ports.ts';
import type { AclEntry, TaskState, WorkflowRecord } from '../../../core/facts/records.ts';
import type { Queryable, TxSql } from './database.ts';
import { leasedStepColumns, leaseOfStep } from './leaseTables.ts';
import {
  type ExecutionRow,
  type StepRow,
  type TaskRow,
  toExecution,
  toStep,
  toTask,
  toWorkflow,
  type WorkflowRow,
} from './rows.ts';

interface AclRow {
  principal_type: AclEntry['principalType'];
  principal_id: string;
  permission: AclEntry['permission'];
}

const toAclEntry = (r: AclRow): AclEntry => ({
  principalType: r.principal_type,
  principalId: r.principal_id,
  permission: r.permission,
});

/** Reads a task with its current execution and all step rows of that execution. */
export async function loadTaskState(sql: Queryable, task: TaskRow, withAcl = false): Promise<TaskState> {
  const [[execution], steps, acl] = await Promise.all([
    sql<ExecutionRow[]>`SELECT * FROM execution WHERE id = ${task.current_execution_id}`,
    sql<StepRow[]>`
      SELECT s.*, ${sql.unsafe(leasedStepColumns)} FROM step s ${sql.unsafe(leaseOfStep)}
      WHERE s.execution_id = ${task.current_execution_id} ORDER BY s.id`,
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
  const rows = await sql<AclRow[]>`
    SELECT principal_type, principal_id, permission FROM task_acl WHERE task_id = ${taskId} AND revoked_at IS NULL`;
  return rows.map(toAclEntry);
}

/**
 * The steps of the tasks' current executions ($1: task ids). Driven by the task ids on step's task
 * index whatever the statistics say: joined on the execution id alone, the plan a new database made
 * before its first ANALYZE hashed a scan of the whole step table (5 ms per batch at 11,000 steps).
 */
export const currentStepsOfTasks = `
  SELECT s.*, ${leasedStepColumns} FROM step s ${leaseOfStep}
  WHERE s.task_id = ANY($1::uuid[])
    AND s.execution_id IN (SELECT current_execution_id FROM task WHERE id = ANY($1::uuid[]))
  ORDER BY s.id`;

export async function advisoryLocks(sql: TxSql, keys: string[]) {
  if (keys.length === 0) return;
  await sql`
      SELECT pg_advisory_xact_lock(hashtext(k)) FROM (SELECT k FROM unnest(${keys}::text[]) AS k ORDER BY k) AS sorted`;
}

/** The advisory lock space of worker capacity (two-key locks, apart from `advisoryLocks`' one-key space). */
const workerCapacityLockSpace = 22_006;

export async function lockWorkerCapacity(
  sql: TxSql,
  workerIds: string[],
  mode: 'all' | 'firstFree',
): Promise<Map<string, WorkerLoad>> {
  const ids = mode === 'all' ? [...new Set(workerIds)].sort() : workerIds;
  if (ids.length === 0) return new Map();
  // `firstFree`: the array's rows in order, each tried without waiting, stopping at the first lock got.
  const lock =
    mode === 'firstFree'
      ? sql<{ id: string }[]>`
        SELECT id FROM unnest(${ids}::uuid[]) AS id
        WHERE pg_try_advisory_xact_lock(${workerCapacityLockSpace}, hashtext(id::text))
        LIMIT 1`
      : sql<{ id: string }[]>`
        SELECT id, pg_advisory_xact_lock(${workerCapacityLockSpace}, hashtext(id::text))
        FROM (SELECT id FROM unnest(${ids}::uuid[]) AS id ORDER BY id) AS sorted`;
  // Sent right behind the lock on the same connection, so it runs once the lock is granted and reads
  // what the previous holder committed. Only workers still taking work count: one that drained or
  // ended since the caller's candidates were read (another replica's snapshot) is left out, as full.
  const count = sql<{ worker_id: string; capability: string | null; running: number }[]>`
    SELECT w.id AS worker_id, s.capability, count(s.id)::int AS running
    FROM worker w
    LEFT JOIN attempt a ON a.worker_id = w.id AND a.revoked_at IS NULL
    LEFT JOIN step s ON s.id = a.step_id
    WHERE w.id = ANY(${ids}::uuid[]) AND w.ended_at IS NULL AND w.runtime_state = 'READY'
    GROUP BY w.id, s.capability`;
  const [locked, rows] = await Promise.all([lock, count]);
  const taking = new Set(rows.map((r) => r.worker_id));
  const loads = new Map<string, WorkerLoad>(
    locked.filter((r) => taking.has(r.id)).map((r) => [r.id, { running: 0, byCapability: {} }]),
  );
  for (const row of rows) {
    const load = loads.get(row.worker_id);
    if (!load || row.capability === null) continue;
    load.running += row.running;
    load.byCapability[row.capability] = row.running;
  }
  return loads;
}

export async function lockTask(sql: TxSql, taskId: string): Promise<TaskState | null> {
  const [task] = await sql<TaskRow[]>`SELECT * FROM task WHERE id = ${taskId} FOR UPDATE`;
  return task ? loadTaskState(sql, task, true) : null;
}

export async function lockTaskIfFree(sql: TxSql, taskId: string): Promise<TaskState | null> {
  const [task] = await sql<TaskRow[]>`SELECT * FROM task WHERE id = ${taskId} FOR UPDATE SKIP LOCKED`;
  return task ? loadTaskState(sql, task, true) : null;
}

export async function lockTasks(sql: TxSql, taskIds: string[], options: { workflows?: boolean } = {}) {
  // Sent together; each statement runs after the lock statement, so all read the locked state.
  const [tasks, executions, steps, acl, workflows] = await Promise.all([
    sql<TaskRow[]>`SELECT * FROM task WHERE id = ANY(${taskIds}::uuid[]) ORDER BY id FOR UPDATE`,
    sql<ExecutionRow[]>`
        SELECT e.* FROM execution e JOIN task t ON e.id = t.current_execution_id WHERE t.id = ANY(${taskIds}::uuid[])`,
    sql.unsafe<StepRow[]>(currentStepsOfTasks, [taskIds], { prepare: true }),
    sql<(AclRow & { task_id: string })[]>`
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
      acl: acl.filter((a) => a.task_id === task.id).map(toAclEntry),
    };
  });
  return { tasks: states, workflows: workflows.map(toWorkflow) };
}

export async function lockWorkflows(sql: TxSql, workflowIds: string[]): Promise<WorkflowRecord[]> {
  const rows = await sql<WorkflowRow[]>`
      SELECT * FROM workflow WHERE id = ANY(${workflowIds}::uuid[]) ORDER BY id FOR UPDATE`;
  return rows.map(toWorkflow);
}

export async function lockWorkflow(sql: TxSql, workflowId: string): Promise<WorkflowRecord | null> {
  const [row] = await sql<WorkflowRow[]>`SELECT * FROM workflow WHERE id = ${workflowId} FOR UPDATE`;
  return row ? toWorkflow(row) : null;
}

export async function findWorkflowByKey(
  sql: TxSql,
  applicationId: string,
  key: string,
): Promise<WorkflowRecord | null> {
  const [row] = await sql<WorkflowRow[]>`
      SELECT * FROM workflow WHERE application_id = ${applicationId} AND client_workflow_key = ${key}`;
  return row ? toWorkflow(row) : null;
}

export async function findTaskIdByClientKey(
  sql: TxSql,
  workflowId: string,
  clientTaskKey: string,
): Promise<string | null> {
  const [row] = await sql<{ id: string }[]>`
      SELECT id FROM task WHERE workflow_id = ${workflowId} AND client_task_key = ${clientTaskKey}`;
  return row?.id ?? null;
}

/** The task's ACL (the entries not revoked). */
export async function aclOf(sql: TxSql, taskId: string): Promise<AclEntry[]> {
  const rows = await sql<AclRow[]>`
      SELECT principal_type, principal_id, permission FROM task_acl WHERE task_id = ${taskId} AND revoked_at IS NULL`;
  return rows.map(toAclEntry);
}

export async function countRegistrationsSince(sql: TxSql, taskId: string, since: Date): Promise<number> {
  const [row] = await sql<{ n: bigint }[]>`
      SELECT count(*) AS n FROM step WHERE task_id = ${taskId} AND dynamic AND created_at > ${since}`;
  return Number(row?.n ?? 0);
}
