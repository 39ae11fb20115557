/**
 * Concurrency keys' settings, the fair-share weights and applications' quotas
 * (`core/workers/schedulingControls.ts`).
 */
import type { OperatorAuditRecord } from '../../../core/facts/records.ts';
import type { ConcurrencyKeyView, SchedulingControlStore, WeightScope } from '../../../core/workers/ports.ts';
import { type Queryable, type Sql, transaction } from './database.ts';
import { insertAudit } from './operatorStore.ts';

type KeyRow = {
  name: string;
  limit: number | null;
  declared_limit: number | null;
  interval_ms: number | null;
  paused: boolean;
  running: number;
  waiting: number;
};

const toView = (r: KeyRow): ConcurrencyKeyView => ({
  name: r.name,
  limit: r.limit,
  declaredLimit: r.declared_limit,
  intervalMs: r.interval_ms,
  paused: r.paused,
  running: r.running,
  waiting: r.waiting,
});

/**
 * The tenant's keys (or one), as concurrency keys or rate limits: declared by its definitions (publish
 * records the latest declaration) and set at run time, with their slots held and steps parked.
 */
function keyRows(sql: Queryable, tenantId: string, name: string | null) {
  return sql<KeyRow[]>`
    SELECT k.name, k."limit", k.declared_limit, k.declared_interval_ms AS interval_ms, k.paused,
      (SELECT count(*)::int FROM concurrency_hold h WHERE h.tenant_id = ${tenantId} AND h.name = k.name) AS running,
      (SELECT count(*)::int FROM scheduling_request r
       WHERE r.status = 'PENDING' AND r.parked_key IS NOT NULL AND r.tenant_id = ${tenantId}
         AND r.parked_key = k.name) AS waiting
    FROM concurrency_key k
    WHERE k.tenant_id = ${tenantId} AND (${name}::text IS NULL OR k.name = ${name})
    ORDER BY k.name`;
}

export class PostgresSchedulingControlStore implements SchedulingControlStore {
  constructor(private readonly sql: Sql) {}

  async keys(tenantId: string) {
    return (await keyRows(this.sql, tenantId, null)).map(toView);
  }

  async changeKey(
    tenantId: string,
    name: string,
    change: { limit?: number | null; paused?: boolean },
    at: Date,
    audit: ((before: ConcurrencyKeyView, after: ConcurrencyKeyView) => OperatorAuditRecord | null) | null,
  ) {
    return transaction(this.sql, async (tx) => {
      // One change of a key at a time (the audit's before and after are then exact).
      await tx`SELECT pg_advisory_xact_lock(hashtext(${`concurrency-key:${tenantId}:${name}`}))`;
      const [before] = await keyRows(tx, tenantId, name);
      if (!before) return null;
      await tx`
        INSERT INTO concurrency_key (tenant_id, name, "limit", paused, updated_at)
        VALUES (${tenantId}, ${name}, ${change.limit === undefined ? before.limit : change.limit},
                ${change.paused ?? before.paused}, ${at})
        ON CONFLICT (tenant_id, name) DO UPDATE SET "limit" = excluded."limit", paused = excluded.paused,
          updated_at = excluded.updated_at`;
      // Placement counts the parked steps of the key's pools again (and parks those still without room).
      await tx`
        UPDATE scheduling_request SET parked_key = NULL, parked_value = NULL, parked_limit = NULL, available_at = ${at}
        WHERE status = 'PENDING' AND parked_key IS NOT NULL AND tenant_id = ${tenantId} AND parked_key = ${name}`;
      const [after] = await keyRows(tx, tenantId, name);
      const record = audit?.(toView(before), toView(after!));
      if (record) await insertAudit(tx, record);
      return toView(after!);
    });
  }

  async tenantOf(scope: 'tenant' | 'application', id: string) {
    const [row] =
      scope === 'tenant'
        ? await this.sql<{ tenant_id: string }[]>`SELECT id AS tenant_id FROM tenant WHERE id = ${id}`
        : await this.sql<{ tenant_id: string }[]>`SELECT tenant_id FROM application WHERE id = ${id}`;
    return row?.tenant_id ?? null;
  }

  async setWeight(scope: WeightScope, id: string, weight: number, at: Date, audit: OperatorAuditRecord) {
    await transaction(this.sql, async (tx) => {
      await tx`
        INSERT INTO scheduling_weight (scope, id, weight, updated_at) VALUES (${scope}, ${id}, ${weight}, ${at})
        ON CONFLICT (scope, id) DO UPDATE SET weight = excluded.weight, updated_at = excluded.updated_at`;
      await insertAudit(tx, audit);
    });
  }

  async setQuota(
    applicationId: string,
    tasksInFlight: number | null,
    at: Date,
    audit: (before: number | null) => OperatorAuditRecord,
  ) {
    await transaction(this.sql, async (tx) => {
      // One change of an application's quota at a time (the audit's before is then exact).
      await tx`SELECT pg_advisory_xact_lock(hashtext(${`application-quota:${applicationId}`}))`;
      const [before] = await tx<{ tasks_in_flight: number }[]>`
        SELECT tasks_in_flight FROM application_quota WHERE application_id = ${applicationId}`;
      if (tasksInFlight === null)
        await tx`DELETE FROM application_quota WHERE application_id = ${applicationId}`;
      else
        await tx`
          INSERT INTO application_quota (application_id, tasks_in_flight, updated_at)
          VALUES (${applicationId}, ${tasksInFlight}, ${at})
          ON CONFLICT (application_id) DO UPDATE SET tasks_in_flight = excluded.tasks_in_flight,
            updated_at = excluded.updated_at`;
      await insertAudit(tx, audit(before?.tasks_in_flight ?? null));
    });
  }
}
