import type { ScheduleAdvance, ScheduleRecord, ScheduleStore } from '../../../core/schedules/ports.ts';
import { type Queryable, type Sql, transaction } from './database.ts';

interface ScheduleRow {
  id: string;
  tenant_id: string;
  application_id: string;
  idempotency_key: string;
  request_hash: string;
  cron: string;
  time_zone: string;
  workflow_name: string;
  workflow_version: string;
  input: unknown;
  overlap: ScheduleRecord['overlap'];
  start_at: Date | null;
  end_at: Date | null;
  paused: boolean;
  next_fire_at: Date | null;
  queued_fire_at: Date | null;
  last_fire_at: Date | null;
  last_task_id: string | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
}

const toRecord = (r: ScheduleRow): ScheduleRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  applicationId: r.application_id,
  idempotencyKey: r.idempotency_key,
  requestHash: r.request_hash,
  cron: r.cron,
  timeZone: r.time_zone,
  workflowName: r.workflow_name,
  workflowVersion: r.workflow_version,
  input: r.input,
  overlap: r.overlap,
  startAt: r.start_at,
  endAt: r.end_at,
  paused: r.paused,
  nextFireAt: r.next_fire_at,
  queuedFireAt: r.queued_fire_at,
  lastFireAt: r.last_fire_at,
  lastTaskId: r.last_task_id,
  lastError: r.last_error,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export class PostgresScheduleStore implements ScheduleStore {
  constructor(private readonly sql: Sql) {}

  async insert(s: ScheduleRecord): Promise<boolean> {
    const rows = await this.sql`
      INSERT INTO schedule (id, tenant_id, application_id, idempotency_key, request_hash, cron, time_zone,
                            workflow_name, workflow_version, input, overlap, start_at, end_at, paused,
                            next_fire_at, created_at, updated_at)
      VALUES (${s.id}, ${s.tenantId}, ${s.applicationId}, ${s.idempotencyKey}, ${s.requestHash}, ${s.cron},
              ${s.timeZone}, ${s.workflowName}, ${s.workflowVersion}, ${this.sql.json(s.input as never)},
              ${s.overlap}, ${s.startAt}, ${s.endAt}, ${s.paused}, ${s.nextFireAt}, ${s.createdAt}, ${s.updatedAt})
      ON CONFLICT (application_id, idempotency_key) DO NOTHING
      RETURNING id`;
    return rows.length > 0;
  }

  async findByKey(applicationId: string, idempotencyKey: string): Promise<ScheduleRecord | null> {
    const [row] = await this.sql<ScheduleRow[]>`
      SELECT * FROM schedule WHERE application_id = ${applicationId} AND idempotency_key = ${idempotencyKey}`;
    return row ? toRecord(row) : null;
  }

  async countForApplication(applicationId: string, atMost: number): Promise<number> {
    const [row] = await this.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM (
        SELECT 1 FROM schedule WHERE application_id = ${applicationId} LIMIT ${atMost}) AS own`;
    return row?.n ?? 0;
  }

  async get(applicationId: string, id: string): Promise<ScheduleRecord | null> {
    const [row] = await this.sql<ScheduleRow[]>`
      SELECT * FROM schedule WHERE application_id = ${applicationId} AND id = ${id}`;
    return row ? toRecord(row) : null;
  }

  async list(applicationId: string, limit: number): Promise<ScheduleRecord[]> {
    const rows = await this.sql<ScheduleRow[]>`
      SELECT * FROM schedule WHERE application_id = ${applicationId}
      ORDER BY created_at DESC, id DESC
      LIMIT ${limit}`;
    return rows.map(toRecord);
  }

  async listAll(limit: number, tenants: 'all' | string[]): Promise<ScheduleRecord[]> {
    const only = tenants === 'all' ? null : tenants;
    const rows = await this.sql<ScheduleRow[]>`
      SELECT * FROM schedule WHERE ${only}::uuid[] IS NULL OR tenant_id = ANY(${only}::uuid[])
      ORDER BY created_at DESC, id DESC LIMIT ${limit}`;
    return rows.map(toRecord);
  }

  async setPaused(
    applicationId: string,
    id: string,
    change: { paused: boolean; nextFireAt: Date | null },
    now: Date,
  ): Promise<ScheduleRecord | null> {
    const [row] = await this.sql<ScheduleRow[]>`
      UPDATE schedule SET paused = ${change.paused}, next_fire_at = ${change.nextFireAt}, updated_at = ${now}
      WHERE application_id = ${applicationId} AND id = ${id}
      RETURNING *`;
    return row ? toRecord(row) : null;
  }

  async withDue(
    now: Date,
    limit: number,
    handle: (schedule: ScheduleRecord) => Promise<ScheduleAdvance>,
  ): Promise<number> {
    return transaction(this.sql, async (tx) => {
      // Held until this commits; another replica's round skips them (and sees them advanced after).
      const rows = await tx<ScheduleRow[]>`
        SELECT * FROM schedule
        WHERE NOT paused AND (next_fire_at <= ${now} OR queued_fire_at IS NOT NULL)
        ORDER BY next_fire_at
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED`;
      for (const row of rows) await advance(tx, row.id, await handle(toRecord(row)), now);
      return rows.length;
    });
  }

  async nextDueAt(): Promise<Date | null> {
    const [row] = await this.sql<{ at: Date | null }[]>`
      SELECT min(next_fire_at) AS at FROM schedule WHERE NOT paused`;
    return row?.at ?? null;
  }
}

async function advance(tx: Queryable, id: string, a: ScheduleAdvance, now: Date): Promise<void> {
  await tx`
    UPDATE schedule
    SET next_fire_at = ${a.nextFireAt}, queued_fire_at = ${a.queuedFireAt}, last_fire_at = ${a.lastFireAt},
        last_task_id = ${a.lastTaskId}, last_error = ${a.lastError}, updated_at = ${now}
    WHERE id = ${id}`;
}
