import type { WorkerCommandRecord } from '../../../core/facts/records.ts';
import type {
  OperatorAuditRecord,
  WorkerCommand,
  WorkerSession,
  WorkerStore,
} from '../../../core/workers/ports.ts';
import type { WorkerCandidate } from '../../../core/workers/selector.ts';
import { unparkWithRoom } from './concurrencyTables.ts';
import { type Sql, transaction } from './database.ts';
import { drainSession, insertAudit } from './operatorStore.ts';
import { unparkSingletons } from './taskKeyTables.ts';

interface WorkerRow {
  id: string;
  instance_id: string;
  name: string;
  node_id: string;
  credential_id: string;
  capabilities: { name: string; version: string; maxConcurrency?: number }[];
  claimed_labels: Record<string, string>;
  resources: { cpuMillis: number; memoryMb: number; gpus: number };
  max_concurrency: number;
  runtime_state: 'READY' | 'DRAINING';
  scheduling_status: 'ELIGIBLE' | 'INELIGIBLE';
  running_attempts: number;
  last_heartbeat_at: Date;
  created_at: Date;
  ended_at: Date | null;
}

const toSession = (r: WorkerRow): WorkerSession => ({
  id: r.id,
  instanceId: r.instance_id,
  name: r.name,
  nodeId: r.node_id,
  credentialId: r.credential_id,
  capabilities: r.capabilities,
  claimedLabels: r.claimed_labels,
  resources: r.resources,
  maxConcurrency: r.max_concurrency,
  runtimeState: r.runtime_state,
  runningAttempts: r.running_attempts,
  lastHeartbeatAt: r.last_heartbeat_at,
  createdAt: r.created_at,
  endedAt: r.ended_at,
});

/** A session's running attempts: its attempts not yet revoked (an attempt is revoked when it ends). */
const openAttempts = (sql: Sql) =>
  sql`(SELECT count(*)::int FROM attempt a WHERE a.worker_id = w.id AND a.revoked_at IS NULL) AS running_attempts`;

export class PostgresWorkerStore implements WorkerStore {
  constructor(private readonly sql: Sql) {}

  async findCredential(id: string) {
    const [row] = await this.sql<{ id: string; secret_hash: Buffer; revoked_at: Date | null }[]>`
      SELECT id, secret_hash, revoked_at FROM worker_credential WHERE id = ${id}`;
    return row ? { id: row.id, secretHash: row.secret_hash, revokedAt: row.revoked_at } : null;
  }

  async insertCredential(id: string, secretHash: Buffer, label: string | null, at: Date) {
    await this
      .sql`INSERT INTO worker_credential (id, secret_hash, label, created_at) VALUES (${id}, ${secretHash}, ${label}, ${at})`;
  }

  async revokeCredential(id: string, at: Date) {
    const rows = await this.sql`
      UPDATE worker_credential SET revoked_at = coalesce(revoked_at, ${at}) WHERE id = ${id} RETURNING id`;
    return rows.length > 0;
  }

  async upsertNode(
    node: {
      id: string;
      labels?: Record<string, string>;
      group?: string | null;
      weight?: number;
    },
    at: Date,
  ) {
    await this.sql`
      INSERT INTO worker_node (id, labels, group_name, weight, management_status, created_at, updated_at)
      VALUES (${node.id}, ${this.sql.json(node.labels ?? {})}, ${node.group ?? null}, ${node.weight ?? 100}, 'ACTIVE', ${at}, ${at})
      ON CONFLICT (id) DO UPDATE SET
        labels = CASE WHEN ${node.labels !== undefined} THEN excluded.labels ELSE worker_node.labels END,
        group_name = CASE WHEN ${node.group !== undefined} THEN excluded.group_name ELSE worker_node.group_name END,
        weight = CASE WHEN ${node.weight !== undefined} THEN excluded.weight ELSE worker_node.weight END,
        updated_at = excluded.updated_at`;
  }

  async insertWorker(w: WorkerSession) {
    await this.sql`
      INSERT INTO worker (id, instance_id, name, node_id, credential_id, capabilities, claimed_labels, resources, max_concurrency,
                          runtime_state, last_heartbeat_at, created_at)
      VALUES (${w.id}, ${w.instanceId}, ${w.name}, ${w.nodeId}, ${w.credentialId}, ${this.sql.json(w.capabilities)},
              ${this.sql.json(w.claimedLabels)}, ${this.sql.json(w.resources)}, ${w.maxConcurrency}, ${w.runtimeState},
              ${w.lastHeartbeatAt}, ${w.createdAt})`;
  }

  async findWorkerOwner(id: string) {
    const [row] = await this.sql<{ id: string; credential_id: string; ended_at: Date | null }[]>`
      SELECT id, credential_id, ended_at FROM worker WHERE id = ${id}`;
    return row ? { id: row.id, credentialId: row.credential_id, endedAt: row.ended_at } : null;
  }

  async heartbeat(id: string, at: Date, runtimeState: 'READY' | 'DRAINING' | null) {
    // `before` is the row as it was, so the answer says whether the state moved. After an operator's
    // drain a beat sent before the worker heard of it must not make it READY again.
    const [row] = await this.sql<{ changed: boolean }[]>`
      UPDATE worker w SET last_heartbeat_at = ${at},
        runtime_state = CASE WHEN w.drain_requested_at IS NOT NULL THEN 'DRAINING'
                             ELSE coalesce(${runtimeState}, w.runtime_state) END
      FROM worker before
      WHERE w.id = ${id} AND before.id = w.id AND w.ended_at IS NULL
      RETURNING w.runtime_state IS DISTINCT FROM before.runtime_state AS changed`;
    return row ? { live: true, stateChanged: row.changed } : { live: false, stateChanged: false };
  }

  async endWorker(id: string, at: Date) {
    await this.sql`UPDATE worker SET ended_at = coalesce(ended_at, ${at}) WHERE id = ${id}`;
  }

  async drainWorker(command: WorkerCommandRecord, audit: OperatorAuditRecord) {
    return transaction(this.sql, async (tx) => {
      const outcome = await drainSession(tx, command, audit.id);
      if (outcome && !outcome.repeated) await insertAudit(tx, audit);
      return outcome;
    });
  }

  async candidates(): Promise<WorkerCandidate[]> {
    const rows = await this.sql<
      (WorkerRow & {
        labels: Record<string, string>;
        group_name: string | null;
        weight: number;
        management_status: 'ACTIVE' | 'CORDONED';
        running_by_capability: Record<string, number>;
      })[]
    >`
      SELECT w.*, coalesce(r.total, 0) AS running_attempts, coalesce(r.by_capability, '{}') AS running_by_capability,
             n.labels, n.group_name, n.weight, n.management_status
      FROM worker w JOIN worker_node n ON n.id = w.node_id
      -- The open attempts of each session, counted per capability of their step.
      LEFT JOIN LATERAL (
        SELECT sum(c.running)::int AS total, jsonb_object_agg(c.capability, c.running) AS by_capability
        FROM (
          SELECT s.capability, count(*)::int AS running
          FROM attempt a JOIN step s ON s.id = a.step_id
          WHERE a.worker_id = w.id AND a.revoked_at IS NULL
          GROUP BY s.capability
        ) c
      ) r ON true
      WHERE w.ended_at IS NULL`;
    return rows.map((r) => ({
      workerId: r.id,
      nodeId: r.node_id,
      nodeStatus: r.management_status,
      nodeLabels: r.labels,
      nodeGroup: r.group_name,
      weight: r.weight,
      runtimeState: r.runtime_state,
      schedulingStatus: r.scheduling_status,
      lastHeartbeatAt: r.last_heartbeat_at,
      capabilities: r.capabilities,
      runningAttempts: r.running_attempts,
      runningByCapability: r.running_by_capability,
      maxConcurrency: r.max_concurrency,
      freeResources: r.resources,
    }));
  }

  async listWorkers(filter: { servingTenants?: string[] } = {}) {
    const tenants = filter.servingTenants;
    const rows = await this.sql<
      (WorkerRow & { labels: Record<string, string>; management_status: string })[]
    >`
      SELECT w.*, ${openAttempts(this.sql)}, n.labels, n.management_status FROM worker w JOIN worker_node n ON n.id = w.node_id
      WHERE w.ended_at IS NULL
        ${
          tenants === undefined
            ? this.sql``
            : this.sql`AND EXISTS (
                SELECT 1
                FROM workflow_definition d
                CROSS JOIN LATERAL jsonb_array_elements(d.steps) AS step
                CROSS JOIN LATERAL jsonb_array_elements(w.capabilities) AS offered
                WHERE d.tenant_id = ANY(${tenants}::uuid[])
                  AND step->>'capability' = offered->>'name'
                  AND step->>'capabilityVersion' = offered->>'version')`
        }
      ORDER BY w.node_id, w.id`;
    return rows.map((r) => ({
      ...toSession(r),
      nodeLabels: r.labels,
      nodeStatus: r.management_status,
      schedulingStatus: r.scheduling_status,
    }));
  }

  async openCommands(workerId: string): Promise<WorkerCommand[]> {
    const rows = await this.sql<
      { id: string; type: WorkerCommand['type']; payload: Record<string, unknown>; created_at: Date }[]
    >`
      SELECT id, type, payload, created_at FROM worker_command
      WHERE worker_id = ${workerId} AND acked_at IS NULL
      ORDER BY id LIMIT 1000`;
    return rows.map((r) => ({ id: r.id, type: r.type, payload: r.payload, createdAt: r.created_at }));
  }

  async ackCommand(workerId: string, commandId: string, at: Date) {
    const rows = await this.sql`
      UPDATE worker_command SET acked_at = coalesce(acked_at, ${at}) WHERE id = ${commandId} AND worker_id = ${workerId} RETURNING id`;
    return rows.length > 0;
  }

  async ackCommands(workerId: string, commandIds: string[], at: Date) {
    const ids = [...new Set(commandIds)];
    // One statement: nothing is acknowledged unless every id is this worker's.
    const [row] = await this.sql<{ owned: string[] }[]>`
      WITH owned AS (
        SELECT id FROM worker_command WHERE id = ANY(${ids}::uuid[]) AND worker_id = ${workerId}
      ), acked AS (
        UPDATE worker_command SET acked_at = coalesce(acked_at, ${at})
        WHERE id IN (SELECT id FROM owned) AND (SELECT count(*) FROM owned) = ${ids.length}
      )
      SELECT coalesce(array_agg(id::text), '{}') AS owned FROM owned`;
    const owned = new Set(row?.owned ?? []);
    return ids.filter((id) => !owned.has(id));
  }

  async deferRequest(id: string, reasons: string[], availableAt: Date) {
    await this
      .sql`UPDATE scheduling_request SET reasons = ${this.sql.json(reasons)}, available_at = ${availableAt} WHERE id = ${id}`;
  }

  /** Only requests deferred for want of a worker (they carry reasons); a delayed step keeps its delay. */
  async retryDeferred(now: Date) {
    const result = await this.sql`UPDATE scheduling_request SET available_at = ${now}
           WHERE status = 'PENDING' AND available_at > ${now} AND reasons <> '[]'::jsonb AND parked_key IS NULL`;
    return result.count;
  }

  async unparkWithRoom(now: Date) {
    return (await unparkWithRoom(this.sql, now)) + (await unparkSingletons(this.sql, now));
  }

  async lostWorkers(before: Date) {
    const rows = await this.sql<{ id: string }[]>`
      SELECT id FROM worker WHERE ended_at IS NULL AND last_heartbeat_at < ${before}
      UNION
      SELECT a.worker_id FROM attempt a
        JOIN worker w ON w.id = a.worker_id AND w.ended_at IS NOT NULL
        JOIN step s ON s.attempt_id = a.id AND s.current AND s.status IN ('QUEUED', 'RUNNING')
      WHERE a.revoked_at IS NULL AND a.worker_id IS NOT NULL
      UNION
      SELECT a.worker_id FROM attempt a
        JOIN worker w ON w.id = a.worker_id AND w.ended_at IS NOT NULL
        JOIN map_item mi ON mi.step_id = a.step_id AND mi.item_index = a.item_index
          AND mi.attempt_id = a.id AND mi.status = 'RUNNING'
      WHERE a.revoked_at IS NULL AND a.worker_id IS NOT NULL`;
    return rows.map((r) => r.id);
  }

  async openAttempts(workerId: string) {
    const rows = await this.sql<
      { id: string; task_id: string; step_id: string; item_index: number | null; created_at: Date }[]
    >`
      SELECT a.id, a.task_id, a.step_id, NULL::integer AS item_index, a.created_at
      FROM attempt a JOIN step s ON s.attempt_id = a.id
      WHERE a.worker_id = ${workerId} AND s.current AND s.status IN ('QUEUED', 'RUNNING')
      UNION ALL
      SELECT a.id, a.task_id, a.step_id, a.item_index, a.created_at FROM attempt a
        JOIN map_item mi ON mi.step_id = a.step_id AND mi.item_index = a.item_index AND mi.attempt_id = a.id
      WHERE a.worker_id = ${workerId} AND a.revoked_at IS NULL AND mi.status = 'RUNNING'`;
    return rows.map((r) => ({
      attemptId: r.id,
      taskId: r.task_id,
      item: r.item_index === null ? null : { stepId: r.step_id, index: r.item_index },
      startedAt: r.created_at,
    }));
  }

  async pendingReasons(taskId: string) {
    const rows = await this.sql<{ step_id: string; reasons: string[] }[]>`
      SELECT step_id, reasons FROM scheduling_request WHERE task_id = ${taskId} AND status = 'PENDING'`;
    return new Map(rows.map((r) => [r.step_id, r.reasons]));
  }
}
