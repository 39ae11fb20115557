import type { TraceContexts } from '../../../core/shared/ports.ts';
import type { Sql } from './database.ts';

/** The `traceparent` each run keeps in its execution snapshot (read only with tracing on). */
export class PostgresTraceContexts implements TraceContexts {
  constructor(private readonly sql: Sql) {}

  async ofTasks(taskIds: string[]): Promise<Map<string, string>> {
    if (taskIds.length === 0) return new Map();
    const rows = await this.sql<{ id: string; traceparent: string }[]>`
      SELECT DISTINCT ON (task_id) task_id AS id, snapshot->>'traceparent' AS traceparent
      FROM execution
      WHERE task_id = ANY(${taskIds}::uuid[])
      ORDER BY task_id, number DESC`;
    return toMap(rows);
  }

  async ofExecutions(executionIds: string[]): Promise<Map<string, string>> {
    if (executionIds.length === 0) return new Map();
    const rows = await this.sql<{ id: string; traceparent: string }[]>`
      SELECT id, snapshot->>'traceparent' AS traceparent FROM execution WHERE id = ANY(${executionIds}::uuid[])`;
    return toMap(rows);
  }
}

const toMap = (rows: { id: string; traceparent: string | null }[]) =>
  new Map(rows.filter((r) => r.traceparent).map((r) => [r.id, r.traceparent!]));
