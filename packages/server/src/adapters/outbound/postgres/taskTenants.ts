/** Which tenant a task belongs to, for the operator routes' scope check (a task never changes tenant). */
import { isUuid } from '@tdp/protocol';
import type { Sql } from './database.ts';

export type TaskTenantLookup = (taskId: string) => Promise<string | null>;

export const taskTenantLookup =
  (sql: Sql): TaskTenantLookup =>
  async (taskId) => {
    if (!isUuid(taskId)) return null;
    const [row] = await sql<{ tenant_id: string }[]>`SELECT tenant_id FROM task WHERE id = ${taskId}`;
    return row?.tenant_id ?? null;
  };
