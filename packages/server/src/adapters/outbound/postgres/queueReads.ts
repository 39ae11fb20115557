/**
 * The queue page's reads (`core/operations/queue.ts`): waiting and running steps per tenant and
 * application, weights and applications' tasks-in-flight quotas, and the attempts placed on workers
 * over time. Concurrency keys are read as the scheduling controls read them.
 */
import type { Placements, QueueReads, TenantQueue } from '../../../core/operations/queue.ts';
import type { Sql } from './database.ts';
import { PostgresSchedulingControlStore } from './schedulingControlStore.ts';

type TenantRow = {
  id: string;
  name: string;
  weight: number;
  waiting: number;
  running: number;
  placed: number;
  applications: TenantQueue['applications'];
};

export class PostgresQueueReads implements QueueReads {
  private readonly controls: PostgresSchedulingControlStore;

  constructor(private readonly sql: Sql) {
    this.controls = new PostgresSchedulingControlStore(sql);
  }

  /**
   * Waiting: open scheduling requests (parked ones too: they wait for a key's slot). Running: attempts
   * open on workers, counted as the workers page counts a worker's load. Placed: attempts given to a
   * worker since `since` (each a placement, retries included).
   */
  async tenantQueues(tenants: 'all' | string[], since: Date, limit: number): Promise<TenantQueue[]> {
    const only = tenants === 'all' ? null : tenants;
    const rows = await this.sql<TenantRow[]>`
      WITH waiting AS (
        SELECT application_id, count(*)::int AS n FROM scheduling_request
        WHERE status = 'PENDING' AND (${only}::uuid[] IS NULL OR tenant_id = ANY(${only}::uuid[]))
        GROUP BY application_id
      ), running AS (
        SELECT application_id, count(*)::int AS n FROM attempt
        WHERE revoked_at IS NULL AND worker_id IS NOT NULL
        GROUP BY application_id
      ), placed AS (
        SELECT application_id, count(*)::int AS n FROM attempt
        WHERE created_at >= ${since} AND worker_id IS NOT NULL
        GROUP BY application_id
      ), applications AS (
        SELECT ap.tenant_id, ap.id, ap.name, coalesce(w.weight, 1)::float8 AS weight,
               coalesce(wa.n, 0) AS waiting, coalesce(r.n, 0) AS running, coalesce(p.n, 0) AS placed,
               q.tasks_in_flight AS quota
        FROM application ap
        LEFT JOIN scheduling_weight w ON w.scope = 'application' AND w.id = ap.id::text
        LEFT JOIN application_quota q ON q.application_id = ap.id
        LEFT JOIN waiting wa ON wa.application_id = ap.id
        LEFT JOIN running r ON r.application_id = ap.id
        LEFT JOIN placed p ON p.application_id = ap.id
        WHERE ${only}::uuid[] IS NULL OR ap.tenant_id = ANY(${only}::uuid[])
      )
      SELECT t.id, t.name, coalesce(w.weight, 1)::float8 AS weight,
             coalesce(sum(a.waiting), 0)::int AS waiting, coalesce(sum(a.running), 0)::int AS running,
             coalesce(sum(a.placed), 0)::int AS placed,
             coalesce(jsonb_agg(jsonb_build_object('id', a.id, 'name', a.name, 'weight', a.weight,
                        'waiting', a.waiting, 'running', a.running, 'placed', a.placed,
                        'tasksInFlightQuota', a.quota)
                      ORDER BY a.waiting + a.running + a.placed DESC, a.name)
                      FILTER (WHERE a.id IS NOT NULL), '[]') AS applications
      FROM tenant t
      LEFT JOIN scheduling_weight w ON w.scope = 'tenant' AND w.id = t.id::text
      LEFT JOIN applications a ON a.tenant_id = t.id
      WHERE ${only}::uuid[] IS NULL OR t.id = ANY(${only}::uuid[])
      GROUP BY t.id, t.name, w.weight
      ORDER BY coalesce(sum(a.waiting + a.running + a.placed), 0) DESC, t.name
      LIMIT ${limit}`;
    return rows.map((r) => ({
      id: r.id,
      name: r.name,
      weight: Number(r.weight),
      waiting: r.waiting,
      running: r.running,
      placed: r.placed,
      applications: r.applications,
    }));
  }

  async placements(tenantIds: string[], from: Date, to: Date): Promise<Placements[]> {
    if (tenantIds.length === 0) return [];
    const rows = await this.sql<{ at: Date; tenant_id: string; application_id: string; placed: number }[]>`
      SELECT date_bin('1 minute'::interval, a.created_at, ${new Date(0)}) AS at, t.tenant_id, a.application_id,
             count(*)::int AS placed
      FROM attempt a JOIN task t ON t.id = a.task_id
      WHERE a.created_at >= ${from} AND a.created_at < ${to} AND a.worker_id IS NOT NULL
        AND t.tenant_id = ANY(${tenantIds}::uuid[])
      GROUP BY 1, 2, 3`;
    return rows.map((r) => ({
      at: r.at,
      tenantId: r.tenant_id,
      applicationId: r.application_id,
      placed: r.placed,
    }));
  }

  keys(tenantId: string) {
    return this.controls.keys(tenantId);
  }
}
