import type { TaskState } from '../../../core/facts/records.ts';
import type { TaskRunReads, TimelineEntry } from '../../../core/operations/ports.ts';
import type { InFlightCount, TaskListFilter, TaskStore, TasksInFlight } from '../../../core/tasks/ports.ts';
import type { Sql } from './database.ts';
import { leasedStepColumns, leaseOfStep } from './leaseTables.ts';
import { type ExecutionRow, type StepRow, type TaskRow, toExecution, toStep, toTask } from './rows.ts';
import { loadTaskState } from './transactionReads.ts';

/** Reads of tasks for the public API (writes go through the fact store). */
export class PostgresTaskStore implements TaskStore, TaskRunReads, TasksInFlight {
  constructor(private readonly sql: Sql) {}

  async inFlight(applicationId: string, platformLimit: number): Promise<InFlightCount> {
    // The application's quota and its count in one round trip; the count stops at the limit (`0`, no
    // limit: nothing counted). Read at most once a second per application (inFlightCounts.ts), from
    // the index of open tasks (task_in_flight), so its cost follows the tasks in flight, not history.
    const [row] = await this.sql<{ n: number; lim: number }[]>`
      WITH quota AS (
        SELECT coalesce(
          (SELECT tasks_in_flight FROM application_quota WHERE application_id = ${applicationId}),
          ${platformLimit}::int) AS lim)
      SELECT (SELECT lim FROM quota) AS lim, (
        SELECT count(*)::int FROM (
          SELECT 1 FROM task
          WHERE application_id = ${applicationId} AND lifecycle_status IN ('PENDING', 'RUNNING')
          LIMIT (SELECT lim FROM quota)) AS in_flight) AS n`;
    return { count: row?.n ?? 0, limit: row?.lim ?? platformLimit };
  }

  async isApplicationTask(applicationId: string, taskId: string): Promise<boolean> {
    const [row] = await this
      .sql`SELECT 1 FROM task WHERE id = ${taskId} AND application_id = ${applicationId}`;
    return row !== undefined;
  }

  /** A task's milestones in order (the API's timeline and the dashboard's). */
  async timeline(taskId: string): Promise<TimelineEntry[]> {
    const rows = await this.sql<
      { kind: string; message: string; data: Record<string, unknown>; at: Date; execution_id: string }[]
    >`SELECT kind, message, data, at, execution_id FROM timeline WHERE task_id = ${taskId} ORDER BY position`;
    return rows.map((r) => ({
      kind: r.kind,
      message: r.message,
      data: r.data,
      at: r.at,
      executionId: r.execution_id,
    }));
  }

  async getTask(applicationId: string, taskId: string): Promise<TaskState | null> {
    const [task] = await this.sql<
      TaskRow[]
    >`SELECT * FROM task WHERE id = ${taskId} AND application_id = ${applicationId}`;
    return task ? loadTaskState(this.sql, task) : null;
  }

  async listTasks(applicationId: string, filter: TaskListFilter): Promise<TaskState[]> {
    const sql = this.sql;
    const tasks = await sql<TaskRow[]>`
      SELECT * FROM task
      WHERE application_id = ${applicationId}
        ${filter.before ? sql`AND id < ${filter.before}` : sql``}
        ${filter.externalRef ? sql`AND external_ref = ${filter.externalRef}` : sql``}
        ${filter.lifecycleStatus ? sql`AND lifecycle_status = ${filter.lifecycleStatus}` : sql``}
        ${filter.parentTaskId ? sql`AND parent_task_id = ${filter.parentTaskId}` : sql``}
      ORDER BY id DESC
      LIMIT ${filter.limit}`;
    return this.withExecutions(tasks);
  }

  /** Tasks with their current executions and steps, in two queries for the whole page. */
  async withExecutions(tasks: TaskRow[]): Promise<TaskState[]> {
    if (tasks.length === 0) return [];
    const executionIds = tasks.map((t) => t.current_execution_id);
    const [executions, steps] = await Promise.all([
      this.sql<ExecutionRow[]>`SELECT * FROM execution WHERE id = ANY(${executionIds}::uuid[])`,
      this.sql<StepRow[]>`
        SELECT s.*, ${this.sql.unsafe(leasedStepColumns)} FROM step s ${this.sql.unsafe(leaseOfStep)}
        WHERE s.execution_id = ANY(${executionIds}::uuid[]) ORDER BY s.id`,
    ]);
    const executionById = new Map(executions.map((e) => [e.id, toExecution(e)]));
    return tasks.map((row) => ({
      task: toTask(row),
      execution: executionById.get(row.current_execution_id)!,
      steps: steps.filter((s) => s.execution_id === row.current_execution_id).map(toStep),
    }));
  }
}
