/**
 * Bulk cancel and bulk retry by filter (`POST /admin/v1/tasks:bulkCancel`, `:bulkRetry`), as a job with
 * progress (`GET /admin/v1/jobs/{id}`): the matched tasks are cancelled (retried) through the tasks'
 * own use cases with the reason, others are left alone, the job is idempotent by key, a job whose
 * claimer died is resumed from its cursor by another replica once the claim expires, and bad input
 * starts nothing.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let sql: ReturnType<typeof connectDatabase>;
type App = Awaited<ReturnType<Harness['createApplication']>>;
let appA: App;
let appB: App;

beforeAll(async () => {
  // A limit of 5 so that a broader filter can be shown refused.
  h = await startHarness({ runLoops: true, settings: { bulkJobTaskLimit: 5 } });
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
  appA = await h.createApplication();
  appB = await h.createApplication();
  for (const app of [appA, appB])
    await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() });
});
afterAll(async () => {
  await sql.end();
  await h.close();
});

// No worker offers the steps: a task stays PENDING until it is cancelled.
async function submit(target: Harness, app: App): Promise<string> {
  const created = await target.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: {
      workflowName: 'zip-clean-watermark',
      workflowVersion: '1',
      name: 'bulk',
      input: { sourceZip: 'asset://z' },
    },
  });
  expect(created.status).toBe(201);
  return created.body.task.id;
}

const bulk = (target: Harness, action: 'bulkCancel' | 'bulkRetry', body: unknown, key?: string) =>
  target.request('POST', `/admin/v1/tasks:${action}`, {
    token: target.adminToken,
    headers: key === undefined ? {} : { 'idempotency-key': key },
    body,
  });
const job = async (target: Harness, id: string) =>
  (await target.request('GET', `/admin/v1/jobs/${id}`, { token: target.adminToken })).body;
const untilEnded = (target: Harness, id: string) =>
  expect.poll(async () => (await job(target, id)).status, { timeout: 15_000 }).toBe('SUCCEEDED');
const lifecycleOf = async (app: App, taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body.task.lifecycleStatus;
const lastEvent = async (taskId: string) =>
  (
    await sql<{ type: string; producer: string; payload: any }[]>`
      SELECT type, producer, payload FROM task_event WHERE task_id = ${taskId} ORDER BY task_version DESC LIMIT 1`
  )[0]!;

describe('bulk cancel and retry', () => {
  let tasksA: string[];
  let taskB: string;
  let cancelJob: string;
  const cancelBody = () => ({
    filter: { applicationId: appA.applicationId, status: 'PENDING' },
    reason: 'incident 42: stop the batch',
  });
  const cancelKey = newId();

  it('cancels every task the filter matches, with the reason, and the job reaches done', async () => {
    tasksA = [];
    for (let i = 0; i < 5; i += 1) tasksA.push(await submit(h, appA));
    taskB = await submit(h, appB);
    const started = await bulk(h, 'bulkCancel', cancelBody(), cancelKey);
    expect(started.status).toBe(202);
    cancelJob = started.body.jobId;
    expect(started.headers.get('location')).toBe(`/admin/v1/jobs/${cancelJob}`);
    await untilEnded(h, cancelJob);
    expect(await job(h, cancelJob)).toMatchObject({
      action: 'CANCEL',
      matched: 5,
      done: 5,
      failed: 0,
      skipped: 0,
      cursor: 5,
      reason: 'incident 42: stop the batch',
      finishedAt: expect.any(String),
    });
    for (const taskId of tasksA) {
      expect(await lifecycleOf(appA, taskId)).toBe('CANCELLED');
      expect(await lastEvent(taskId)).toMatchObject({
        type: 'TASK_CANCELLED',
        producer: 'operator:bootstrap admin token',
        payload: { reason: 'incident 42: stop the batch' },
      });
    }
    // Another application's task is not in the filter.
    expect(await lifecycleOf(appB, taskB)).toBe('PENDING');
    const audit =
      await sql`SELECT action, actor, reason, details FROM operator_audit WHERE subject_id = ${cancelJob}`;
    expect(audit).toEqual([
      {
        action: 'TASKS_BULK_CANCEL',
        actor: 'bootstrap admin token',
        reason: 'incident 42: stop the batch',
        details: { filter: cancelBody().filter, idempotencyKey: cancelKey },
      },
    ]);
  });

  it('answers the same job for the same key and request, and 409 for the same key with another request', async () => {
    const again = await bulk(h, 'bulkCancel', cancelBody(), cancelKey);
    expect(again.status).toBe(202);
    expect(again.body.jobId).toBe(cancelJob);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const other = await bulk(h, 'bulkCancel', { ...cancelBody(), reason: 'another reason' }, cancelKey);
    expect(other.status).toBe(409);
    expect(other.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    // The same body as a retry is another request too.
    const asRetry = await bulk(h, 'bulkRetry', cancelBody(), cancelKey);
    expect(asRetry.status).toBe(409);
    const jobs = await sql`SELECT id FROM bulk_job`;
    expect(jobs.map((j) => j.id)).toEqual([cancelJob]);
  });

  it('retries every finished task the filter matches (execution #2), with the reason; the others are left', async () => {
    const started = await bulk(
      h,
      'bulkRetry',
      { filter: { applicationId: appA.applicationId, status: 'CANCELLED' }, reason: 'incident 42 fixed' },
      newId(),
    );
    expect(started.status).toBe(202);
    await untilEnded(h, started.body.jobId);
    expect(await job(h, started.body.jobId)).toMatchObject({
      action: 'RETRY',
      matched: 5,
      done: 5,
      skipped: 0,
    });
    for (const taskId of tasksA) {
      const read = (await h.request('GET', `/v1/tasks/${taskId}`, { token: appA.apiKey })).body;
      expect([read.task.lifecycleStatus, read.execution.number]).toEqual(['PENDING', 2]);
      expect(await lastEvent(taskId)).toMatchObject({
        type: 'TASK_RETRIED',
        producer: 'operator:bootstrap admin token',
        payload: { reason: 'incident 42 fixed', executionNumber: 2 },
      });
    }
    expect(await lifecycleOf(appB, taskB)).toBe('PENDING');
  });

  it('counts a task with nothing to do as skipped (a retry of a task still running)', async () => {
    const started = await bulk(
      h,
      'bulkRetry',
      { filter: { applicationId: appB.applicationId }, reason: 'try B again' },
      newId(),
    );
    await untilEnded(h, started.body.jobId);
    expect(await job(h, started.body.jobId)).toMatchObject({ matched: 1, done: 0, skipped: 1, failed: 0 });
    const [row] = await sql`SELECT outcome, detail FROM bulk_job_task WHERE job_id = ${started.body.jobId}`;
    expect(row).toMatchObject({ outcome: 'SKIPPED', detail: expect.stringContaining('INVALID_TRANSITION') });
  });

  it('refuses bad input with a problem and starts nothing', async () => {
    const rowsNow = async () =>
      (
        await sql<{ rows: number }[]>`
          SELECT (SELECT count(*) FROM bulk_job)::int + (SELECT count(*) FROM operator_audit)::int AS rows`
      )[0]!.rows;
    const before = await rowsNow();
    const good = { filter: { status: 'PENDING' }, reason: 'r' };
    const cases: [string, () => ReturnType<Harness['request']>, number, string][] = [
      ['no Idempotency-Key', () => bulk(h, 'bulkCancel', good), 400, 'IDEMPOTENCY_KEY_REQUIRED'],
      ['no reason', () => bulk(h, 'bulkCancel', { filter: good.filter }, newId()), 400, 'VALIDATION_FAILED'],
      [
        'an empty reason',
        () => bulk(h, 'bulkCancel', { ...good, reason: '' }, newId()),
        400,
        'VALIDATION_FAILED',
      ],
      [
        'an empty filter',
        () => bulk(h, 'bulkRetry', { filter: {}, reason: 'r' }, newId()),
        400,
        'VALIDATION_FAILED',
      ],
      ['no filter', () => bulk(h, 'bulkCancel', { reason: 'r' }, newId()), 400, 'VALIDATION_FAILED'],
      [
        'an unknown filter field',
        () => bulk(h, 'bulkCancel', { filter: { owner: 'x' }, reason: 'r' }, newId()),
        400,
        'VALIDATION_FAILED',
      ],
      [
        'an unknown status',
        () => bulk(h, 'bulkCancel', { filter: { status: 'DONE' }, reason: 'r' }, newId()),
        400,
        'VALIDATION_FAILED',
      ],
      [
        'a time range that ends before it starts',
        () =>
          bulk(
            h,
            'bulkCancel',
            {
              filter: { createdFrom: '2026-02-01T00:00:00Z', createdTo: '2026-01-01T00:00:00Z' },
              reason: 'r',
            },
            newId(),
          ),
        400,
        'VALIDATION_FAILED',
      ],
      [
        'a time the database cannot store',
        () =>
          bulk(h, 'bulkCancel', { filter: { createdFrom: '0001-01-01T00:00:00Z' }, reason: 'r' }, newId()),
        400,
        'VALIDATION_FAILED',
      ],
      [
        'more tasks than a job may take (6 of this workflow, limit 5)',
        () =>
          bulk(h, 'bulkCancel', { filter: { workflowName: 'zip-clean-watermark' }, reason: 'r' }, newId()),
        422,
        'BULK_FILTER_TOO_BROAD',
      ],
      [
        'no admin token',
        () =>
          h.request('POST', '/admin/v1/tasks:bulkCancel', {
            token: appA.apiKey,
            headers: { 'idempotency-key': newId() },
            body: good,
          }),
        401,
        'UNAUTHENTICATED',
      ],
      [
        'an unknown job',
        () => h.request('GET', `/admin/v1/jobs/${newId()}`, { token: h.adminToken }),
        404,
        'JOB_NOT_FOUND',
      ],
    ];
    for (const [name, send, status, code] of cases) {
      const answer = await send();
      expect([name, answer.status, answer.body.code]).toEqual([name, status, code]);
      expect(answer.headers.get('content-type')).toContain('application/problem+json');
    }
    expect(await rowsNow()).toBe(before);
    expect(await lifecycleOf(appB, taskB)).toBe('PENDING');
  });
});

describe('a job whose claimer died', () => {
  it('is resumed from its cursor by another replica once the claim expires, and not before', async () => {
    // One replica serves the API without loops; the job it creates waits for a runner.
    const api = await startHarness({ runLoops: false });
    let runner: Harness | null = null;
    const db = connectDatabase({ url: api.databaseUrl, maxConnections: 1 });
    try {
      const app = await api.createApplication();
      await api.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() });
      const tasks: string[] = [];
      for (let i = 0; i < 4; i += 1) tasks.push(await submit(api, app));
      const started = await bulk(
        api,
        'bulkCancel',
        { filter: { applicationId: app.applicationId }, reason: 'resume me' },
        newId(),
      );
      expect(started.status).toBe(202);
      const jobId = started.body.jobId;
      expect(await job(api, jobId)).toMatchObject({ status: 'RUNNING', matched: 4, cursor: 0 });

      // A replica claimed it, cancelled the first task (as the job does), moved the cursor, and died
      // holding a claim that runs ten more minutes.
      await api.request('POST', `/v1/tasks/${tasks[0]}:cancel`, {
        token: app.apiKey,
        body: { reason: 'resume me' },
      });
      await db`
        UPDATE bulk_job SET claim_id = ${newId()}, claim_expires_at = now() + interval '10 minutes',
               cursor = 1, done = 1
        WHERE id = ${jobId}`;
      await db`UPDATE bulk_job_task SET outcome = 'DONE' WHERE job_id = ${jobId} AND position = 1`;

      runner = await startHarness({ sharedDatabaseUrl: api.databaseUrl, runLoops: true });
      // While the claim holds, the job is left alone (the loop looks every second).
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      expect(await job(runner, jobId)).toMatchObject({ status: 'RUNNING', cursor: 1, done: 1 });
      const waiting = await runner.request('GET', `/v1/tasks/${tasks[1]}`, { token: app.apiKey });
      expect(waiting.body.task.lifecycleStatus).toBe('PENDING');

      runner.clock.advance(11 * 60_000);
      await untilEnded(runner, jobId);
      // From the cursor on: the first task is not handled again (it would count as skipped).
      expect(await job(runner, jobId)).toMatchObject({
        matched: 4,
        done: 4,
        skipped: 0,
        failed: 0,
        cursor: 4,
      });
      for (const taskId of tasks) {
        const read = await runner.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey });
        expect(read.body.task.lifecycleStatus).toBe('CANCELLED');
      }
    } finally {
      await db.end();
      await runner?.close();
      await api.close();
    }
  });
});
