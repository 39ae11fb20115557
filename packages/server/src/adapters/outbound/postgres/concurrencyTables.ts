/**
 * Concurrency keys' slots (`core/definitions/concurrencyKeys.ts`, docs/scheduling.md): holding them at
 * placement, giving them back with the fact that stops a step, and letting parked steps in.
 */
import { poolLockKey } from '../../../core/definitions/concurrencyKeys.ts';
import { type ConcurrencyRefusal, singletonPool } from '../../../core/facts/ports.ts';
import type { StepRecord } from '../../../core/facts/records.ts';
import type { Queryable, TxSql } from './database.ts';
import type { MergedWrites } from './mergeWrites.ts';
import type { RowStatement } from './recordset.ts';
import { advisoryLocks } from './transactionReads.ts';

/** A slot's `item_index` when the step's own attempt holds it (a map item's holds its index). */
export const ownAttempt = -1;

/**
 * Holds a slot of each pool for the step, or none: the pools are locked (until commit, so two placers
 * never both take a pool's last slot), their running steps counted against the limit (the one set at
 * run time, else the one the key's latest definition declares, else the task's own), and the slots
 * written at once (a second placement in the same transaction counts them). Refused: the first pool
 * that is paused or full.
 */
export async function holdConcurrency(
  sql: TxSql,
  hold: {
    tenantId: string;
    taskId: string;
    stepId: string;
    itemIndex?: number | undefined;
    keys: { name: string; value: string; declaredLimit: number }[];
    at: Date;
  },
): Promise<ConcurrencyRefusal | null> {
  const { tenantId, keys } = hold;
  await advisoryLocks(
    sql,
    keys.map((k) => poolLockKey('concurrency', tenantId, k.name, k.value)),
  );
  const names = keys.map((k) => k.name);
  const [settings, counts] = await Promise.all([
    sql<{ name: string; limit: number | null; paused: boolean }[]>`
      SELECT name, coalesce("limit", declared_limit) AS "limit", paused
      FROM concurrency_key WHERE tenant_id = ${tenantId} AND name = ANY(${names}::text[])`,
    sql<{ name: string; value: string; running: number }[]>`
      SELECT h.name, h.value, count(*)::int AS running FROM concurrency_hold h
      JOIN unnest(${names}::text[], ${keys.map((k) => k.value)}::text[]) AS k(name, value)
        ON h.tenant_id = ${tenantId} AND h.name = k.name AND h.value = k.value
      GROUP BY h.name, h.value`,
  ]);
  for (const key of keys) {
    const setting = settings.find((s) => s.name === key.name);
    const limit = setting?.limit ?? key.declaredLimit;
    const running = counts.find((c) => c.name === key.name && c.value === key.value)?.running ?? 0;
    const paused = setting?.paused ?? false;
    if (paused || running >= limit)
      return { key: { name: key.name, value: key.value }, running, limit, paused };
  }
  await sql`
    INSERT INTO concurrency_hold (step_id, item_index, name, tenant_id, value, task_id, created_at)
    SELECT ${hold.stepId}, ${hold.itemIndex ?? ownAttempt}, k.name, ${tenantId}, k.value, ${hold.taskId}, ${hold.at}
    FROM unnest(${names}::text[], ${keys.map((k) => k.value)}::text[]) AS k(name, value)
    ON CONFLICT (step_id, item_index, name) DO NOTHING`;
  return null;
}

/** A step holds its slots while its attempt is placed or running. */
const holdsSlots = (s: StepRecord) => s.status === 'QUEUED' || s.status === 'RUNNING';

/**
 * The slots of what the commit stopped are given back, and for each slot one parked step of its pool is
 * let in (due now; placement counts again). What stopped: a step's attempt (with it every slot the step
 * holds, its map items' too), a map's items all at once (`closeMapItems`), or one map item's attempt
 * (`item_index`). Two statements of the commit's one (recordset.ts), so both read the slots as they were
 * before it. A parked step of a task this commit writes is left to the recheck (`unparkWithRoom`): the
 * commit may be closing its request, and one statement may not change a row twice.
 */
const written = `jsonb_to_recordset($1::text::jsonb) AS x(step_id uuid, item_index int, task_id uuid, stopped boolean, at timestamptz)`;

const freedHolds = `SELECT h.step_id, h.item_index, h.name FROM concurrency_hold h JOIN ${written}
  ON x.stopped AND h.step_id = x.step_id AND (x.item_index IS NULL OR h.item_index = x.item_index)`;

const releaseText = `DELETE FROM concurrency_hold
  WHERE (step_id, item_index, name) IN (${freedHolds})`;

const unparkText = `UPDATE scheduling_request
  SET parked_key = NULL, parked_value = NULL, parked_limit = NULL,
      available_at = (SELECT min(x.at) FROM ${written})
  WHERE id IN (
    SELECT r.id FROM (
      SELECT h.tenant_id, h.name, h.value, count(*) AS slots FROM concurrency_hold h
      WHERE (h.step_id, h.item_index, h.name) IN (${freedHolds})
      GROUP BY h.tenant_id, h.name, h.value) AS freed
    CROSS JOIN LATERAL (
      SELECT id FROM scheduling_request
      WHERE status = 'PENDING' AND parked_key IS NOT NULL
        AND tenant_id = freed.tenant_id AND parked_key = freed.name AND parked_value = freed.value
        AND task_id <> ALL(ARRAY(SELECT x.task_id FROM ${written}))
      ORDER BY order_at LIMIT freed.slots
      FOR UPDATE SKIP LOCKED) AS r)`;

interface WrittenHolder {
  step_id: string;
  /** Null: every slot of the step. */
  item_index: number | null;
  task_id: string;
  stopped: boolean;
  at: Date;
}

export function pushConcurrencyReleaseStatements(w: MergedWrites, statements: RowStatement[]): void {
  const steps = [...w.newSteps, ...w.steps];
  const stepStopped = (s: StepRecord) => s.attemptId !== null && !holdsSlots(s);
  const closedMaps = new Set(w.closeMapItems.map((c) => c.stepId));
  const itemsStopped = w.mapItems.filter((i) => i.status !== 'RUNNING' && !closedMaps.has(i.stepId));
  if (!steps.some(stepStopped) && closedMaps.size === 0 && itemsStopped.length === 0) return;
  const taskOf = new Map(steps.map((s) => [s.id, s.taskId]));
  const holders: WrittenHolder[] = [
    ...steps.map((s) => ({
      step_id: s.id,
      item_index: null,
      task_id: s.taskId,
      stopped: stepStopped(s) || closedMaps.has(s.id),
      at: s.updatedAt,
    })),
    // An item's counters are the map step's: every write of an item writes its step too.
    ...itemsStopped.flatMap((i) => {
      const taskId = taskOf.get(i.stepId);
      return taskId
        ? [{ step_id: i.stepId, item_index: i.index, task_id: taskId, stopped: true, at: i.updatedAt }]
        : [];
    }),
  ];
  const rows = JSON.stringify(holders);
  statements.push({ text: releaseText, rows }, { text: unparkText, rows });
}

/**
 * The recheck: parked steps of pools that have room under the limit that parked them (or the one set
 * since, or none when resumed) are let in, as many as there is room for. It catches a slot given back
 * while the round that parked a step had not yet committed (the round rechecks `only` the pools it
 * parked on once it has committed; the leases loop all of them), and limits raised or keys resumed.
 */
export async function unparkWithRoom(
  sql: Queryable,
  now: Date,
  only: { tenantId: string; name: string; value: string }[] | null = null,
): Promise<number> {
  const onlyRows =
    only && JSON.stringify(only.map((p) => ({ tenant_id: p.tenantId, name: p.name, value: p.value })));
  const result = await sql`
    WITH pools AS (
      SELECT tenant_id, parked_key AS name, parked_value AS value, max(parked_limit) AS parked_limit
      FROM scheduling_request WHERE status = 'PENDING' AND parked_key IS NOT NULL
        AND (${onlyRows}::text IS NULL OR (tenant_id, parked_key, parked_value) IN (
          SELECT x.tenant_id, x.name, x.value
          FROM jsonb_to_recordset(${onlyRows}::text::jsonb) AS x(tenant_id uuid, name text, value text)))
        AND parked_key <> ${singletonPool} -- no slots: taskKeyTables.ts \`unparkSingletons\` rechecks those
      GROUP BY tenant_id, parked_key, parked_value),
    room AS (
      SELECT p.tenant_id, p.name, p.value,
             coalesce(k."limit", k.declared_limit, p.parked_limit) - (
               SELECT count(*) FROM concurrency_hold h
               WHERE h.tenant_id = p.tenant_id AND h.name = p.name AND h.value = p.value) AS slots
      FROM pools p LEFT JOIN concurrency_key k ON k.tenant_id = p.tenant_id AND k.name = p.name
      WHERE NOT coalesce(k.paused, false))
    UPDATE scheduling_request SET parked_key = NULL, parked_value = NULL, parked_limit = NULL, available_at = ${now}
    WHERE id IN (
      SELECT r.id FROM room CROSS JOIN LATERAL (
        SELECT id FROM scheduling_request
        WHERE status = 'PENDING' AND parked_key IS NOT NULL
          AND tenant_id = room.tenant_id AND parked_key = room.name AND parked_value = room.value
        ORDER BY order_at LIMIT greatest(room.slots, 0)
        FOR UPDATE SKIP LOCKED) r)`;
  return result.count;
}
