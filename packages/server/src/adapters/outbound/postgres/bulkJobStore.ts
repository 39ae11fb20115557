/** Bulk operator jobs (`bulk_job`, `bulk_job_task`, migration 018) and their audit row. */
import type { OperatorAuditRecord } from '../../../core/facts/records.ts';
import type {
  BulkJobRecord,
  BulkJobStore,
  BulkJobTask,
  BulkTaskFilter,
  BulkTaskOutcome,
} from '../../../core/operations/ports.ts';
import { isUniqueViolation, type Sql, transaction } from './database.ts';
import { insertAudit } from './operatorStore.ts';

interface JobRow {
  id: string;
  action: BulkJobRecord['action'];
  idempotency_key: string;
  request_hash: string;
  filter: BulkTaskFilter;
  tenant_ids: string[] | null;
  reason: string;
  actor: string;
  status: BulkJobRecord['status'];
  matched: number;
  done: number;
  failed: number;
  skipped: number;
  cursor: number;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

const toJob = (r: JobRow): BulkJobRecord => ({
  id: r.id,
  action: r.action,
  idempotencyKey: r.idempotency_key,
  requestHash: r.request_hash,
  filter: r.filter,
  tenantIds: r.tenant_ids,
  reason: r.reason,
  actor: r.actor,
  status: r.status,
  matched: r.matched,
  done: r.done,
  failed: r.failed,
  skipped: r.skipped,
  cursor: r.cursor,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  finishedAt: r.finished_at,
});

const jobColumns = `id, action, idempotency_key, request_hash, filter, tenant_ids, reason, actor, status, matched, done,
  failed, skipped, cursor, created_at, updated_at, finished_at`;

export class PostgresBulkJobStore implements BulkJobStore {
  constructor(private readonly sql: Sql) {}

  async create(job: BulkJobRecord, limit: number, audit: OperatorAuditRecord) {
    const f = job.filter;
    try {
      return await transaction(this.sql, async (tx) => {
        await tx`
          INSERT INTO bulk_job (id, action, idempotency_key, request_hash, filter, tenant_ids, reason, actor,
                                status, matched, created_at, updated_at)
          VALUES (${job.id}, ${job.action}, ${job.idempotencyKey}, ${job.requestHash}, ${tx.json(f as never)},
                  ${job.tenantIds}::uuid[], ${job.reason}, ${job.actor}, 'RUNNING', 0, ${job.createdAt}, ${job.createdAt})`;
        // The tasks that match now, oldest first; one more than the limit says the filter is too broad.
        const [counted] = await tx<{ matched: number }[]>`
          WITH picked AS (
            SELECT id, tenant_id, application_id, row_number() OVER (ORDER BY created_at, id) AS position
            FROM task
            WHERE (${f.status ?? null}::text IS NULL OR lifecycle_status = ${f.status ?? null})
              AND (${f.applicationId ?? null}::uuid IS NULL OR application_id = ${f.applicationId ?? null}::uuid)
              AND (${f.workflowName ?? null}::text IS NULL OR workflow_name = ${f.workflowName ?? null})
              AND (${f.createdFrom ?? null}::timestamptz IS NULL OR created_at >= ${f.createdFrom ?? null}::timestamptz)
              AND (${f.createdTo ?? null}::timestamptz IS NULL OR created_at < ${f.createdTo ?? null}::timestamptz)
              AND (${job.tenantIds}::uuid[] IS NULL OR tenant_id = ANY(${job.tenantIds}::uuid[]))
            ORDER BY created_at, id
            LIMIT ${limit + 1}
          ), frozen AS (
            INSERT INTO bulk_job_task (job_id, position, task_id, tenant_id, application_id)
            SELECT ${job.id}, position, id, tenant_id, application_id FROM picked
            RETURNING 1
          )
          SELECT count(*)::int AS matched FROM frozen`;
        const matched = counted!.matched;
        if (matched > limit) throw new TooMany();
        await tx`UPDATE bulk_job SET matched = ${matched} WHERE id = ${job.id}`;
        await insertAudit(tx, audit);
        return { kind: 'created' as const, matched };
      });
    } catch (error) {
      if (error instanceof TooMany) return { kind: 'tooMany' as const };
      if (isUniqueViolation(error)) return { kind: 'taken' as const };
      throw error;
    }
  }

  async findByKey(idempotencyKey: string) {
    const [row] = await this.sql<JobRow[]>`
      SELECT ${this.sql.unsafe(jobColumns)} FROM bulk_job WHERE idempotency_key = ${idempotencyKey}`;
    return row ? toJob(row) : null;
  }

  async get(id: string) {
    const [row] = await this.sql<
      JobRow[]
    >`SELECT ${this.sql.unsafe(jobColumns)} FROM bulk_job WHERE id = ${id}`;
    return row ? toJob(row) : null;
  }

  async claim(claimId: string, now: Date, expiresAt: Date) {
    const [row] = await this.sql<JobRow[]>`
      UPDATE bulk_job SET claim_id = ${claimId}, claim_expires_at = ${expiresAt}
      WHERE id = (
        SELECT id FROM bulk_job
        WHERE status = 'RUNNING' AND (claim_expires_at IS NULL OR claim_expires_at <= ${now})
        ORDER BY created_at, id LIMIT 1
        FOR UPDATE SKIP LOCKED
      )
      RETURNING ${this.sql.unsafe(jobColumns)}`;
    return row ? toJob(row) : null;
  }

  async tasksAfter(jobId: string, cursor: number, limit: number): Promise<BulkJobTask[]> {
    const rows = await this.sql<
      { position: number; task_id: string; tenant_id: string; application_id: string }[]
    >`
      SELECT position, task_id, tenant_id, application_id FROM bulk_job_task
      WHERE job_id = ${jobId} AND position > ${cursor}
      ORDER BY position LIMIT ${limit}`;
    return rows.map((r) => ({
      position: r.position,
      taskId: r.task_id,
      tenantId: r.tenant_id,
      applicationId: r.application_id,
    }));
  }

  async recordOutcome(
    jobId: string,
    claimId: string,
    task: BulkJobTask,
    outcome: BulkTaskOutcome,
    now: Date,
    expiresAt: Date,
  ) {
    const detail = outcome.outcome === 'DONE' ? null : outcome.detail.slice(0, 500);
    // One statement: the task's row and the job's counters and cursor, only while the claim is ours.
    const [row] = await this.sql<{ moved: number }[]>`
      WITH job AS (
        UPDATE bulk_job SET cursor = ${task.position}, updated_at = ${now}, claim_expires_at = ${expiresAt},
          done = done + ${outcome.outcome === 'DONE' ? 1 : 0},
          skipped = skipped + ${outcome.outcome === 'SKIPPED' ? 1 : 0},
          failed = failed + ${outcome.outcome === 'FAILED' ? 1 : 0}
        WHERE id = ${jobId} AND claim_id = ${claimId} AND status = 'RUNNING'
        RETURNING id
      ), item AS (
        UPDATE bulk_job_task SET outcome = ${outcome.outcome}, detail = ${detail}
        WHERE job_id IN (SELECT id FROM job) AND position = ${task.position}
      )
      SELECT count(*)::int AS moved FROM job`;
    return row!.moved === 1;
  }

  async release(jobId: string, claimId: string) {
    await this.sql`
      UPDATE bulk_job SET claim_id = NULL, claim_expires_at = NULL WHERE id = ${jobId} AND claim_id = ${claimId}`;
  }

  async finish(jobId: string, claimId: string, status: 'SUCCEEDED' | 'FAILED', now: Date) {
    await this.sql`
      UPDATE bulk_job SET status = ${status}, finished_at = ${now}, updated_at = ${now},
             claim_id = NULL, claim_expires_at = NULL
      WHERE id = ${jobId} AND claim_id = ${claimId} AND status = 'RUNNING'`;
  }

  async nextDueAt(now: Date) {
    const [row] = await this.sql<{ due: Date | null }[]>`
      SELECT min(coalesce(claim_expires_at, ${now})) AS due FROM bulk_job WHERE status = 'RUNNING'`;
    return row?.due ?? null;
  }
}

/** The filter matched more tasks than the limit: the transaction is rolled back. */
class TooMany extends Error {}
