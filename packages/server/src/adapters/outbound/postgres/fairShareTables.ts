/**
 * The scheduler's fair-share reads and writes (`core/workers/fairShare.ts` decides, `fairClaim.ts`
 * composes): tagging new requests, the round's turns, and the tags and virtual times a round leaves.
 */
import type {
  Arrival,
  ArrivalTags,
  ClaimedSchedulingRequest,
  FlowState,
  SchedulingTurns,
  TaggedRequest,
  VirtualTimes,
} from '../../../core/facts/ports.ts';
import { applicationFlow, keyFlow, tenantFlow } from '../../../core/workers/fairShare.ts';
import type { TxSql } from './database.ts';

/** One replica tags at a time (the flows' last tags are read and written under it); the others skip. */
const taggingLockKey = 'scheduling:tagging';

const noFlows: FlowState = {
  platformServed: 0,
  lastTag: new Map(),
  tenantServed: new Map(),
  applicationServed: new Map(),
  weights: new Map(),
};

/**
 * Untagged open requests, oldest first, with what tagging needs of their flows; null when another
 * replica is tagging now (its round tags them).
 */
export async function schedulingArrivals(
  sql: TxSql,
  limit: number,
): Promise<{ arrivals: Arrival[]; flows: FlowState } | null> {
  const [lock] = await sql<{ got: boolean }[]>`
    SELECT pg_try_advisory_xact_lock(hashtext(${taggingLockKey})) AS got`;
  if (!lock?.got) return null;
  // A request written before fair share (or a map's reopened one) may lack its tenant: its task has it.
  const rows = await sql<
    {
      id: string;
      tenant_id: string;
      application_id: string;
      fairness_key: string;
      fairness_weight: number;
      priority: number;
      created_at: Date;
    }[]
  >`
    SELECT r.id, coalesce(r.tenant_id, t.tenant_id) AS tenant_id,
           coalesce(r.application_id, t.application_id) AS application_id, r.fairness_key, r.fairness_weight,
           r.priority, r.created_at
    FROM scheduling_request r LEFT JOIN task t ON r.tenant_id IS NULL AND t.id = r.task_id
    WHERE r.status = 'PENDING' AND r.tenant_tag IS NULL
    ORDER BY r.created_at
    LIMIT ${limit}
    FOR UPDATE OF r SKIP LOCKED`;
  if (rows.length === 0) return { arrivals: [], flows: noFlows };
  const arrivals = rows
    .filter((r) => r.tenant_id !== null)
    .map((r) => ({
      id: r.id,
      tenantId: r.tenant_id,
      applicationId: r.application_id,
      fairnessKey: r.fairness_key,
      fairnessWeight: r.fairness_weight,
      priority: r.priority,
      createdAt: r.created_at,
    }));
  const tenants = [...new Set(arrivals.map((a) => a.tenantId))];
  const applications = [...new Set(arrivals.map((a) => a.applicationId))];
  const keys = [...new Set(arrivals.map((a) => keyFlow(a.applicationId, a.fairnessKey)))];
  const flowKeys = ['platform', ...tenants.map(tenantFlow), ...applications.map(applicationFlow), ...keys];
  const [flowRows, weightRows] = await Promise.all([
    sql<{ flow: string; last_tag: number; served_tag: number }[]>`
      SELECT flow, last_tag, served_tag FROM scheduling_flow WHERE flow = ANY(${flowKeys}::text[])`,
    sql<{ scope: string; id: string; weight: number }[]>`
      SELECT scope, id, weight FROM scheduling_weight
      WHERE (scope = 'tenant' AND id = ANY(${tenants}::text[]))
         OR (scope = 'application' AND id = ANY(${applications}::text[]))
         OR (scope = 'key' AND id = ANY(${keys.map((k) => k.slice('key:'.length))}::text[]))`,
  ]);
  const flows: FlowState = {
    platformServed: flowRows.find((f) => f.flow === 'platform')?.served_tag ?? 0,
    lastTag: new Map(flowRows.map((f) => [f.flow, f.last_tag])),
    tenantServed: new Map(
      flowRows.filter((f) => f.flow.startsWith('tenant:')).map((f) => [f.flow, f.served_tag]),
    ),
    applicationServed: new Map(
      flowRows.filter((f) => f.flow.startsWith('application:')).map((f) => [f.flow, f.served_tag]),
    ),
    weights: new Map(weightRows.map((w) => [`${w.scope}:${w.id}`, w.weight])),
  };
  return { arrivals, flows };
}

/** The arrivals' tags, with their tenant and application, and their flows' new last tags. */
export async function writeArrivalTags(
  sql: TxSql,
  arrivals: Arrival[],
  tags: ArrivalTags[],
  lastTags: Map<string, number>,
) {
  if (tags.length === 0) return;
  const byId = new Map(arrivals.map((a) => [a.id, a]));
  const rows = tags.map((t) => ({
    id: t.id,
    tenant_id: byId.get(t.id)!.tenantId,
    application_id: byId.get(t.id)!.applicationId,
    tenant_tag: t.tenantTag,
    application_tag: t.applicationTag,
    key_tag: t.keyTag,
    order_at: t.orderAt,
  }));
  const flows = [...lastTags].sort(([a], [b]) => (a < b ? -1 : 1)).map(([flow, tag]) => ({ flow, tag }));
  await Promise.all([
    sql`UPDATE scheduling_request r
        SET tenant_id = x.tenant_id, application_id = x.application_id, tenant_tag = x.tenant_tag,
            application_tag = x.application_tag, key_tag = x.key_tag, order_at = x.order_at
        FROM jsonb_to_recordset(${JSON.stringify(rows)}::text::jsonb) AS x(id uuid, tenant_id uuid,
             application_id uuid, tenant_tag double precision, application_tag double precision,
             key_tag double precision, order_at timestamptz)
        WHERE r.id = x.id`,
    sql`INSERT INTO scheduling_flow (flow, last_tag)
        SELECT x.flow, x.tag FROM jsonb_to_recordset(${JSON.stringify(flows)}::text::jsonb) AS x(flow text, tag double precision)
        ON CONFLICT (flow) DO UPDATE SET last_tag = excluded.last_tag`,
  ]);
}

type TurnRow = {
  level: 'tenant' | 'application' | 'key' | 'served';
  id: string;
  task_id: string;
  step_id: string;
  reasons: string[];
  tenant_id: string;
  application_id: string;
  fairness_key: string;
  tenant_tag: number;
  application_tag: number;
  key_tag: number;
};

/** A request that may have a turn: open, tagged, not parked on a concurrency key, and due. */
const open = `status = 'PENDING' AND parked_key IS NULL AND tenant_tag IS NOT NULL AND available_at <= $1`;
const columns = `id, task_id, step_id, reasons, tenant_id, application_id, fairness_key, tenant_tag,
  application_tag, key_tag`;

/**
 * One round's turns, all locked until commit (SKIP LOCKED: another replica's round has those): the
 * `limit` lowest tenant tags; within each tenant as many of its lowest application tags; within each
 * application as many of its lowest key tags; within each key as many of its first requests by order —
 * the ones served. A request may have a turn only if it is open (the partial indexes' predicate).
 * `untriedOnly` (every worker is busy: the requests only need their reasons): the lowest tenant tags of
 * requests no round has tried yet, served as they come, from an index of their own (the tried ones,
 * due and waiting for a slot, may be a long backlog to scan past).
 */
export async function schedulingTurns(
  sql: TxSql,
  now: Date,
  limit: number,
  untriedOnly: boolean,
): Promise<SchedulingTurns> {
  const rows = await sql.unsafe<TurnRow[]>(untriedOnly ? untriedTurns : fairTurns, [now, limit]);
  return toTurns(rows);
}

const fairTurns = `
  WITH tenant_turns AS (
    SELECT ${columns} FROM scheduling_request WHERE ${open}
    ORDER BY tenant_tag LIMIT $2
    FOR UPDATE SKIP LOCKED),
  per_tenant AS (SELECT tenant_id, count(*) AS turns FROM tenant_turns GROUP BY tenant_id),
  application_turns AS (
    SELECT r.* FROM per_tenant p CROSS JOIN LATERAL (
      SELECT ${columns} FROM scheduling_request WHERE tenant_id = p.tenant_id AND ${open}
      ORDER BY application_tag LIMIT p.turns
      FOR UPDATE SKIP LOCKED) r),
  per_application AS (
    SELECT application_id, count(*) AS turns FROM application_turns GROUP BY application_id),
  key_turns AS (
    SELECT r.* FROM per_application p CROSS JOIN LATERAL (
      SELECT ${columns} FROM scheduling_request WHERE application_id = p.application_id AND ${open}
      ORDER BY key_tag LIMIT p.turns
      FOR UPDATE SKIP LOCKED) r),
  per_key AS (
    SELECT application_id, fairness_key, count(*) AS turns FROM key_turns
    GROUP BY application_id, fairness_key),
  served AS (
    SELECT r.* FROM per_key p CROSS JOIN LATERAL (
      SELECT ${columns} FROM scheduling_request
      WHERE application_id = p.application_id AND fairness_key = p.fairness_key AND ${open}
      ORDER BY order_at LIMIT p.turns
      FOR UPDATE SKIP LOCKED) r)
  SELECT 'tenant' AS level, * FROM tenant_turns
  UNION ALL SELECT 'application', * FROM application_turns
  UNION ALL SELECT 'key', * FROM key_turns
  UNION ALL SELECT 'served', * FROM served`;

const untriedTurns = `
  SELECT 'served' AS level, ${columns} FROM scheduling_request
  WHERE ${open} AND reasons = '[]'::jsonb
  ORDER BY tenant_tag LIMIT $2
  FOR UPDATE SKIP LOCKED`;

function toTurns(rows: TurnRow[]): SchedulingTurns {
  const tagged = (r: TurnRow): TaggedRequest => ({
    id: r.id,
    tenantId: r.tenant_id,
    applicationId: r.application_id,
    fairnessKey: r.fairness_key,
    tenantTag: r.tenant_tag,
    applicationTag: r.application_tag,
    keyTag: r.key_tag,
  });
  const served = rows.filter((r) => r.level === 'served');
  return {
    tenantTurns: rows.filter((r) => r.level === 'tenant').map(tagged),
    applicationTurns: rows.filter((r) => r.level === 'application').map(tagged),
    keyTurns: rows.filter((r) => r.level === 'key').map(tagged),
    served: served.map(tagged),
    claimed: served.map(
      (r): ClaimedSchedulingRequest => ({
        id: r.id,
        taskId: r.task_id,
        tenantId: r.tenant_id,
        stepId: r.step_id,
        reasons: r.reasons,
      }),
    ),
  };
}

/** The tags a round's turns moved, and the virtual times it served (never moved back). */
export async function writeTurns(sql: TxSql, retagged: TaggedRequest[], served: VirtualTimes | null) {
  const flows = served
    ? [['platform', served.platformServed] as const, ...served.tenantServed, ...served.applicationServed]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([flow, tag]) => ({ flow, tag }))
    : [];
  const tags = retagged.map((r) => ({
    id: r.id,
    tenant_tag: r.tenantTag,
    application_tag: r.applicationTag,
    key_tag: r.keyTag,
  }));
  await Promise.all([
    tags.length > 0
      ? sql`UPDATE scheduling_request r
            SET tenant_tag = x.tenant_tag, application_tag = x.application_tag, key_tag = x.key_tag
            FROM jsonb_to_recordset(${JSON.stringify(tags)}::text::jsonb)
                 AS x(id uuid, tenant_tag double precision, application_tag double precision, key_tag double precision)
            WHERE r.id = x.id`
      : null,
    flows.length > 0
      ? sql`INSERT INTO scheduling_flow (flow, served_tag)
            SELECT x.flow, x.tag FROM jsonb_to_recordset(${JSON.stringify(flows)}::text::jsonb) AS x(flow text, tag double precision)
            ON CONFLICT (flow) DO UPDATE SET served_tag = greatest(scheduling_flow.served_tag, excluded.served_tag)`
      : null,
  ]);
}
