/**
 * The references migration 006 stopped enforcing with foreign keys (rows written per task, step, attempt
 * or fact), checked instead after every integration test: a row that points at nothing is a bug in the
 * write path, and this names it.
 */
import type { Sql } from '../packages/server/src/adapters/outbound/postgres/database.ts';

const references: [table: string, column: string, parent: string][] = [
  ['task', 'tenant_id', 'tenant'],
  ['task', 'application_id', 'application'],
  ['task', 'workflow_definition_id', 'workflow_definition'],
  ['task', 'workflow_id', 'workflow'],
  ['task', 'parent_task_id', 'task'],
  ['task', 'parent_step_id', 'step'],
  ['workflow', 'tenant_id', 'tenant'],
  ['workflow', 'application_id', 'application'],
  ['execution', 'task_id', 'task'],
  ['step', 'task_id', 'task'],
  ['step', 'execution_id', 'execution'],
  ['task_event', 'task_id', 'task'],
  ['task_event', 'execution_id', 'execution'],
  ['attempt', 'task_id', 'task'],
  ['attempt', 'step_id', 'step'],
  ['attempt', 'worker_id', 'worker'],
  ['task_acl', 'task_id', 'task'],
  ['task_external_ref', 'task_id', 'task'],
  ['scheduling_request', 'task_id', 'task'],
  ['scheduling_request', 'step_id', 'step'],
  ['worker_command', 'worker_id', 'worker'],
  ['timer', 'task_id', 'task'],
  ['callback_delivery', 'application_id', 'application'],
  ['callback_delivery', 'task_id', 'task'],
  ['callback_delivery', 'execution_id', 'execution'],
  ['timeline', 'task_id', 'task'],
  ['access_grant', 'attempt_id', 'attempt'],
  ['access_grant', 'application_id', 'application'],
  ['map_item', 'step_id', 'step'],
  ['map_item', 'attempt_id', 'attempt'],
];

/** Each reference with rows that point at nothing, as "table.column → parent: count". */
export async function danglingReferences(sql: Sql): Promise<string[]> {
  const rows = await sql.unsafe<{ reference: string; n: number }[]>(
    references
      .map(
        ([table, column, parent]) =>
          `SELECT '${table}.${column} → ${parent}' AS reference, count(*)::int AS n FROM ${table} c
           WHERE c.${column} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ${parent} p WHERE p.id = c.${column})`,
      )
      .join(' UNION ALL '),
  );
  return rows.filter((r) => r.n > 0).map((r) => `${r.reference}: ${r.n}`);
}
