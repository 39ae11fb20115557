/**
 * Work no worker can take is loud: the publish warns of a capability no registered worker offers (with
 * the nearest names), the timeline says once why a ready step waits, and a schedule-to-start limit (the
 * task's, the workflow's or the server's default) fails the step with that reason.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { completeWith, startTestWorker } from '../../../test/testWorker.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
let sql: ReturnType<typeof connectDatabase>;

/** The server's default in this harness: long enough for the tests that do not time out. */
const serverDefaultMs = 120_000;

const oneStep = (name: string, capability: string, extra: Record<string, unknown> = {}) => ({
  name,
  version: '1',
  steps: [{ key: 'only', capability, capabilityVersion: '1', retry: { maxAttempts: 1 } }],
  ...extra,
});

beforeAll(async () => {
  h = await startHarness({ runLoops: true, settings: { scheduleToStartDefaultMs: serverDefaultMs } });
  app = await h.createApplication();
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
  // A worker session offering image.watermark@1, registered over HTTP (nothing runs behind it).
  await h.request('POST', '/v1/workers/register', {
    token: workerKey,
    body: {
      instanceId: newId(),
      name: 'watermarker',
      nodeId: 'node-watermarker',
      capabilities: [{ name: 'image.watermark', version: '1' }],
    },
  });
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
});
afterAll(async () => {
  await sql?.end();
  await h?.close();
});

const publish = (body: Record<string, unknown>) =>
  h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body });
const submit = (workflowName: string, extra: Record<string, unknown> = {}) =>
  h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName, workflowVersion: '1', name: 'task', ...extra },
  });
const timeline = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: app.apiKey })).body.items as {
    kind: string;
    message: string;
  }[];
const waiting = async (taskId: string) =>
  (await timeline(taskId)).filter((m) => m.kind === 'WAITING_FOR_WORKER');
const task = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
/** Moves the clock past the scheduler's retry and waits until its round has deferred the request again. */
async function nextSchedulerRound(taskId: string) {
  h.clock.advance(5_001);
  await expect
    .poll(
      async () => {
        const [row] = await sql<{ available_at: Date }[]>`
          SELECT available_at FROM scheduling_request WHERE task_id = ${taskId} AND status = 'PENDING'`;
        return row !== undefined && row.available_at.getTime() > h.clock.now().getTime();
      },
      { timeout: 10_000 },
    )
    .toBe(true);
}

describe('a capability no worker offers', () => {
  it('publishes with a warning naming the step and the nearest offered name', async () => {
    const published = await publish(oneStep('misspelt-wf', 'image.watermrk'));
    expect(published.status).toBe(201);
    expect(published.body.warnings).toEqual([
      expect.objectContaining({
        code: 'CAPABILITY_NOT_OFFERED',
        stepKey: 'only',
        capability: 'image.watermrk',
        suggestions: ['image.watermark@1'],
        message: expect.stringContaining('did you mean image.watermark@1?'),
      }),
    ]);
    // Publishing it again (a replay) warns again; an offered capability warns of nothing.
    expect((await publish(oneStep('misspelt-wf', 'image.watermrk'))).body.warnings).toHaveLength(1);
    expect((await publish(oneStep('offered-wf', 'image.watermark'))).body.warnings).toEqual([]);
  });

  it('warns of a required $.input mapping in a workflow without an inputSchema, and of nothing once it is optional', async () => {
    const mapped = (name: string, from: unknown) => ({
      name,
      version: '1',
      steps: [
        { key: 'only', capability: 'image.watermark', capabilityVersion: '1', inputMapping: { text: from } },
      ],
    });
    const published = await publish(mapped('undeclared-wf', '$.input.text'));
    expect(published.status).toBe(201);
    expect(published.body.warnings).toEqual([
      {
        code: 'INPUT_NOT_DECLARED',
        stepKey: 'only',
        path: '/steps/0/inputMapping/text',
        message: expect.stringContaining('the workflow has no inputSchema'),
      },
    ]);
    const optional = await publish(mapped('optional-wf', { from: '$.input.text', optional: true }));
    expect(optional.body.warnings).toEqual([]);
  });

  it('records "waiting for a worker" on the timeline once, not on every scheduler round', async () => {
    const taskId = (await submit('misspelt-wf')).body.task.id;
    await expect.poll(async () => (await waiting(taskId)).length, { timeout: 10_000 }).toBe(1);
    await nextSchedulerRound(taskId);
    await nextSchedulerRound(taskId);
    const said = await waiting(taskId);
    expect(said).toHaveLength(1);
    expect(said[0]!.message).toBe('step only is waiting for a worker: no worker offers image.watermrk@1');
    h.clock.set(new Date());
  });

  it.each([
    ['the task', 'misspelt-wf', { scheduleToStartMs: 10_000 }, 10_000],
    ['the workflow', 'misspelt-limited-wf', {}, 10_000],
    ['the server default', 'misspelt-wf', {}, serverDefaultMs],
  ])(
    'fails after the schedule-to-start limit of %s, with the reason',
    async (_of, workflow, extra, limitMs) => {
      await publish({ ...oneStep('misspelt-limited-wf', 'image.watermrk'), scheduleToStartMs: 10_000 });
      const taskId = (await submit(workflow, extra)).body.task.id;
      try {
        await expect.poll(async () => (await waiting(taskId)).length, { timeout: 10_000 }).toBe(1);
        h.clock.advance(limitMs + 1);
        await expect
          .poll(async () => (await task(taskId)).task.lifecycleStatus, { timeout: 10_000 })
          .toBe('FAILED');
        expect((await task(taskId)).task.failure).toMatchObject({
          code: 'SCHEDULE_TO_START_TIMEOUT',
          failedStepId: 'only',
          userMessage: `Step only timed out: no worker started it within ${limitMs} ms: no worker offers image.watermrk@1`,
        });
      } finally {
        h.clock.set(new Date());
      }
    },
  );

  it('runs normally when a worker offering it registers within the limit', async () => {
    await publish(oneStep('late-worker-wf', 'late.op', { scheduleToStartMs: 60_000 }));
    const taskId = (await submit('late-worker-wf')).body.task.id;
    await expect.poll(async () => (await waiting(taskId)).length, { timeout: 10_000 }).toBe(1);
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-late',
      capabilities: [{ name: 'late.op', version: '1' }],
      handler: completeWith({ done: true }),
    });
    try {
      await expect
        .poll(async () => (await task(taskId)).task.lifecycleStatus, { timeout: 10_000 })
        .toBe('SUCCEEDED');
    } finally {
      await worker.stop();
    }
  });
});
