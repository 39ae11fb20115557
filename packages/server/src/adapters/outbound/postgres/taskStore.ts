import type { TaskState } from '../../../core/facts/records.ts';
import type { TaskListFilter, TaskStore } from '../../../core/tasks/ports.ts';
import type { Sql } from './database.ts';
import { type ExecutionRow, type StepRow, type TaskRow, toExecution, toStep, toTask } from './rows.ts';
import { loadTaskState } from './transactionReads.ts';

/** Reads of tasks for the public API (writes go through the status store). */
export class PostgresTaskStore implements TaskStore {
  constructor(private readonly sql: Sql) {}

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
      this.sql<StepRow[]>`SELECT * FROM step WHERE execution_id = ANY(${executionIds}::uuid[]) ORDER BY id`,
    ]);
    const executionById = new Map(executions.map((e) => [e.id, toExecution(e)]));
    return tasks.map((row) => ({
      task: toTask(row),
      execution: executionById.get(row.current_execution_id)!,
      steps: steps.filter((s) => s.execution_id === row.current_execution_id).map(toStep),
    }));
  }
}
