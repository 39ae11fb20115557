/**
 * Bulk cancel and bulk retry (`POST /admin/v1/tasks:bulkCancel`, `:bulkRetry`): an operator names a
 * filter and a reason; the tasks it matches are frozen into a job, which the bulk job loop of any
 * replica works through, a few tasks a round, each through the tasks context's own cancel or retry
 * (the `BulkTaskActions` port). The job is idempotent by key (same key and request: the same job) and
 * resumable: its cursor moves one task at a time under the replica's claim, and a claim that expires
 * (the replica died) lets another replica carry on from the cursor.
 */
import { operatorProducer } from '../facts/operatorActor.ts';
import type { OperatorActor } from '../facts/records.ts';
import { fingerprint } from '../shared/canonicalJson.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import type {
  BulkAction,
  BulkJobRecord,
  BulkJobStore,
  BulkTaskActions,
  BulkTaskFilter,
  BulkTaskOutcome,
} from './ports.ts';

export const bulkActionAudit: Record<BulkAction, string> = {
  CANCEL: 'TASKS_BULK_CANCEL',
  RETRY: 'TASKS_BULK_RETRY',
};

export interface BulkJobDeps {
  jobs: BulkJobStore;
  clock: Clock;
  ids: IdGenerator;
  /** A filter matching more tasks than this is refused. */
  taskLimit: number;
  /** A job was created: the loop should look now. */
  started?: () => void;
}

export interface BulkJobRequest {
  filter: BulkTaskFilter;
  reason: string;
}

/** Starts a job, or answers the job its idempotency key already started (`replayed`). */
export async function startBulkJob(
  deps: BulkJobDeps,
  action: BulkAction,
  idempotencyKey: string,
  request: BulkJobRequest,
  actor: OperatorActor,
  /** The tenants the operator may act on: the job matches tasks of these only. */
  tenants: 'all' | string[],
): Promise<{ job: BulkJobRecord; replayed: boolean }> {
  const requestHash = fingerprint({ action, ...request });
  // Keys are each operator's own: another's job with the same key (maybe of tenants this one does not
  // see) is neither answered nor a reason to refuse.
  const ownKey = `${actor.operatorId ?? 'bootstrap'} ${idempotencyKey}`;
  const existing = await deps.jobs.findByKey(ownKey);
  if (existing) return replay(existing, requestHash, idempotencyKey);
  requireFilter(request.filter);
  const now = deps.clock.now();
  const job: BulkJobRecord = {
    id: deps.ids.newId(),
    action,
    idempotencyKey: ownKey,
    requestHash,
    filter: request.filter,
    tenantIds: tenants === 'all' ? null : tenants,
    reason: request.reason,
    actor: operatorProducer(actor),
    status: 'RUNNING',
    matched: 0,
    done: 0,
    failed: 0,
    skipped: 0,
    cursor: 0,
    createdAt: now,
    updatedAt: now,
    finishedAt: null,
  };
  const created = await deps.jobs.create(job, deps.taskLimit, {
    id: deps.ids.newId(),
    action: bulkActionAudit[action],
    subjectId: job.id,
    actor,
    reason: request.reason,
    details: { filter: request.filter, idempotencyKey },
    tenantId: tenants !== 'all' && tenants.length === 1 ? tenants[0] : null,
    createdAt: now,
  });
  if (created.kind === 'tooMany') {
    throw new AppError(
      'BULK_FILTER_TOO_BROAD',
      `the filter matches more than ${deps.taskLimit} tasks; narrow it (e.g. a shorter time range)`,
    );
  }
  if (created.kind === 'taken') {
    // A concurrent request with the same key created its job first.
    return replay((await deps.jobs.findByKey(ownKey))!, requestHash, idempotencyKey);
  }
  deps.started?.();
  return { job: { ...job, matched: created.matched }, replayed: false };
}

function replay(existing: BulkJobRecord, requestHash: string, key: string) {
  if (existing.requestHash !== requestHash) {
    throw new AppError(
      'IDEMPOTENCY_KEY_REUSED',
      `Idempotency-Key "${key}" was used for a different request; use a new key for a new job`,
    );
  }
  return { job: existing, replayed: true };
}

function requireFilter(filter: BulkTaskFilter): void {
  const given = Object.values(filter).filter((v) => v !== undefined);
  if (given.length === 0) {
    throw new AppError('VALIDATION_FAILED', 'the filter names no field; give at least one', [
      { path: '/filter', message: 'give at least one field' },
    ]);
  }
  const from = instant(filter.createdFrom, 'createdFrom');
  const to = instant(filter.createdTo, 'createdTo');
  if (from !== null && to !== null && from >= to) {
    throw new AppError('VALIDATION_FAILED', 'createdTo must be after createdFrom', [
      { path: '/filter/createdTo', message: 'must be after createdFrom' },
    ]);
  }
}

/** A filter's time as milliseconds, within years the database stores (1970–9999); null when not given. */
function instant(text: string | undefined, field: string): number | null {
  if (text === undefined) return null;
  const ms = Date.parse(text);
  const year = new Date(ms).getUTCFullYear();
  if (Number.isNaN(ms) || year < 1970 || year > 9999) {
    throw new AppError('VALIDATION_FAILED', `${field} must be a time between the years 1970 and 9999`, [
      { path: `/filter/${field}`, message: 'must be a time between the years 1970 and 9999' },
    ]);
  }
  return ms;
}

export async function getBulkJob(deps: Pick<BulkJobDeps, 'jobs'>, id: string): Promise<BulkJobRecord> {
  const job = await deps.jobs.get(id);
  if (!job) throw new AppError('JOB_NOT_FOUND', `job ${id} does not exist`);
  return job;
}

export interface BulkJobRunnerDeps {
  jobs: BulkJobStore;
  actions: BulkTaskActions;
  clock: Clock;
  ids: IdGenerator;
  batchSize: number;
  claimMs: number;
}

/**
 * One round of the loop: claims a job that needs a runner, handles up to `batchSize` of its tasks, and
 * ends it when none is left. Returns whether it had a job (more work may be waiting).
 */
export async function runBulkJobRound(deps: BulkJobRunnerDeps): Promise<boolean> {
  const claimId = deps.ids.newId();
  const expiry = () => new Date(deps.clock.now().getTime() + deps.claimMs);
  const job = await deps.jobs.claim(claimId, deps.clock.now(), expiry());
  if (!job) return false;
  const tasks = await deps.jobs.tasksAfter(job.id, job.cursor, deps.batchSize);
  if (tasks.length === 0) {
    // Every task was handled: the job failed if any of them did (the counts and rows say which).
    const status = job.failed > 0 ? 'FAILED' : 'SUCCEEDED';
    await deps.jobs.finish(job.id, claimId, status, deps.clock.now());
    return true;
  }
  for (const task of tasks) {
    let outcome: BulkTaskOutcome;
    try {
      outcome =
        job.action === 'CANCEL'
          ? await deps.actions.cancel(task, job.reason, job.actor)
          : await deps.actions.retry(task, job.reason, job.actor);
    } catch (error) {
      // One task's failure is counted and the job goes on; the detail stays with the task's row.
      outcome = { outcome: 'FAILED', detail: error instanceof Error ? error.message : String(error) };
    }
    const kept = await deps.jobs.recordOutcome(job.id, claimId, task, outcome, deps.clock.now(), expiry());
    // Another replica took the job over (this one was too slow): it carries on from the cursor.
    if (!kept) return true;
  }
  // Let go of the job, so the next round (here or on another replica) takes it at once.
  await deps.jobs.release(job.id, claimId);
  return true;
}
