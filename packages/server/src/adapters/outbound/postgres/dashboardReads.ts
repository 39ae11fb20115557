/**
 * The operator dashboard's reads: tasks, attempts, queued steps and definitions, across the tenants
 * the reader sees.
 */
import type {
  DashboardAttemptRow,
  DashboardQueuedStep,
  DashboardReads,
  DashboardTaskFilter,
  DashboardTaskPage,
  DashboardWorkflowDefinition,
} from '../../../core/operations/ports.ts';
import type { Sql } from './database.ts';

export class PostgresDashboardReads implements DashboardReads {
  constructor(private readonly sql: Sql) {}

  // Newest tasks first (ids are time-ordered UUIDv7, so this walks the primary key).
  async tasks(filter: DashboardTaskFilter): Promise<DashboardTaskPage> {
    const { status, applicationId, workflow, limit } = filter;
    const sql = this.sql;
    const only = filter.tenants === 'all' ? null : filter.tenants;
    const byTenant = only ? sql`AND t.tenant_id = ANY(${only}::uuid[])` : sql``;
    const byApplication = applicationId ? sql`AND t.application_id = ${applicationId}` : sql``;
    const byWorkflow = workflow ? sql`AND t.workflow_name = ${workflow}` : sql``;
    const byStatus = status ? sql`AND t.lifecycle_status = ${status}` : sql``;
    const [items, counts, applications, workflows] = await Promise.all([
      sql`
          SELECT t.id, t.tenant_id, t.application_id, a.name AS application_name, t.workflow_name,
                 t.workflow_version, t.name, t.lifecycle_status, t.health, t.version, t.failure,
                 t.created_at, t.updated_at, t.started_at, t.finished_at, e.progress, e.number AS execution_number
          FROM task t
          JOIN execution e ON e.id = t.current_execution_id
          JOIN application a ON a.id = t.application_id
          WHERE true ${byTenant} ${byApplication} ${byWorkflow} ${byStatus}
          ORDER BY t.id DESC
          LIMIT ${limit}`,
      sql<{ lifecycle_status: string; n: number }[]>`
          SELECT t.lifecycle_status, count(*)::int AS n FROM task t
          WHERE true ${byTenant} ${byApplication} ${byWorkflow}
          GROUP BY t.lifecycle_status`,
      sql`SELECT id, name, tenant_id FROM application
          WHERE ${only}::uuid[] IS NULL OR tenant_id = ANY(${only}::uuid[]) ORDER BY name`,
      sql<{ workflow_name: string }[]>`
          SELECT DISTINCT name AS workflow_name FROM workflow_definition
          WHERE ${only}::uuid[] IS NULL OR tenant_id = ANY(${only}::uuid[]) ORDER BY name`,
    ]);
    return {
      items: items.map((t) => ({
        id: t.id,
        tenantId: t.tenant_id,
        applicationId: t.application_id,
        applicationName: t.application_name,
        workflowName: t.workflow_name,
        workflowVersion: t.workflow_version,
        name: t.name,
        lifecycleStatus: t.lifecycle_status,
        health: t.health,
        version: t.version,
        progress: t.progress,
        executionNumber: t.execution_number,
        failure: t.failure,
        createdAt: t.created_at,
        updatedAt: t.updated_at,
        startedAt: t.started_at,
        finishedAt: t.finished_at,
      })),
      counts: counts.map((c) => ({ lifecycleStatus: c.lifecycle_status, n: c.n })),
      applications: applications.map((a) => ({ id: a.id, name: a.name, tenantId: a.tenant_id })),
      workflows: workflows.map((w) => w.workflow_name),
    };
  }

  async attempts(taskId: string): Promise<DashboardAttemptRow[]> {
    const rows = await this.sql`
          SELECT a.id, s.step_key, s.attempt, a.worker_id, w.name AS worker_name, w.node_id, a.lease_version,
                 a.created_at, a.revoked_at, s.status, s.started_at, s.finished_at
          FROM attempt a
          JOIN step s ON s.id = a.step_id
          LEFT JOIN worker w ON w.id = a.worker_id
          -- A map's item attempts (one per item, thousands) are not listed: the map step shows its counters.
          WHERE a.task_id = ${taskId} AND a.item_index IS NULL
          ORDER BY a.created_at`;
    return rows.map((a) => ({
      id: a.id,
      stepKey: a.step_key,
      attempt: a.attempt,
      workerId: a.worker_id,
      workerName: a.worker_name,
      nodeId: a.node_id,
      leaseVersion: a.lease_version,
      status: a.status,
      createdAt: a.created_at,
      startedAt: a.started_at,
      finishedAt: a.finished_at,
      revokedAt: a.revoked_at,
    }));
  }

  async queuedSteps(): Promise<DashboardQueuedStep[]> {
    const rows = await this.sql`
        SELECT r.task_id, t.name AS task_name, s.step_key, s.capability, s.capability_version, r.reasons, r.created_at
        FROM scheduling_request r
        JOIN step s ON s.id = r.step_id
        JOIN task t ON t.id = r.task_id
        WHERE r.status = 'PENDING'
        ORDER BY r.created_at LIMIT 200`;
    return rows.map((q) => ({
      taskId: q.task_id,
      taskName: q.task_name,
      stepKey: q.step_key,
      capability: q.capability,
      capabilityVersion: q.capability_version,
      reasons: q.reasons,
      createdAt: q.created_at,
    }));
  }

  async stepHealth() {
    const [[stale], [queued]] = await Promise.all([
      this.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM execution_lease WHERE health = 'STALE'`,
      this.sql<{ n: number; oldest: Date | null }[]>`
        SELECT count(*)::int AS n, min(created_at) AS oldest FROM scheduling_request WHERE status = 'PENDING'`,
    ]);
    return {
      staleSteps: stale?.n ?? 0,
      queued: { count: queued?.n ?? 0, oldest: queued?.oldest ?? null },
    };
  }

  async workflowDefinitions(tenants: 'all' | string[]): Promise<DashboardWorkflowDefinition[]> {
    const only = tenants === 'all' ? null : tenants;
    const rows = await this.sql`
      SELECT d.id, d.name, d.version, d.steps, d.published_at, t.name AS tenant_name
      FROM workflow_definition d JOIN tenant t ON t.id = d.tenant_id
      WHERE ${only}::uuid[] IS NULL OR d.tenant_id = ANY(${only}::uuid[])
      ORDER BY d.name, d.published_at DESC`;
    return rows.map((d) => ({
      id: d.id,
      name: d.name,
      version: d.version,
      tenantName: d.tenant_name,
      steps: d.steps,
      publishedAt: d.published_at,
    }));
  }
}
