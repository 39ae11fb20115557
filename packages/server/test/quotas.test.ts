/**
 * Quotas per application on a real server and database, each set small here: map items per step and
 * per task (refused at create when the list is the task's input, failing the map step with
 * MAP_ITEMS_LIMIT when it is an upstream output), tasks in flight (429 with Retry-After), and schedules
 * per application with a minimum interval between fires (422). Each refusal is counted in /metrics.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { completeWith, startTestWorker } from '../../../test/testWorker.ts';

let h: Harness;
let keys = 0;
const workers: Awaited<ReturnType<typeof startTestWorker>>[] = [];

beforeAll(async () => {
  h = await startHarness({
    runLoops: true,
    settings: {
      mapItemsPerStep: 5,
      mapItemsPerTask: 8,
      tasksInFlightLimit: 3,
      schedulesPerApplication: 2,
      scheduleMinIntervalSeconds: 60,
    },
  });
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  workers.push(
    await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-quota-extract',
      capabilities: [{ name: 'quota.extract', version: '1' }],
      handler: async (command, report) =>
        completeWith({ frames: Array.from({ length: Number(command.input.count) }, (_, n) => ({ n })) })(
          command,
          report,
        ),
    }),
  );
});

afterAll(async () => {
  for (const worker of workers) await worker.stop();
  await h?.close();
});

/** `tdp_quota_refused_total{code}` as /metrics shows it. */
async function refused(code: string): Promise<number> {
  const text = (await h.request('GET', '/metrics')).body as string;
  const line = text.split('\n').find((l) => l.startsWith(`tdp_quota_refused_total{code="${code}"}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

const submit = (apiKey: string, workflowName: string, input: Record<string, unknown>) =>
  h.request('POST', '/v1/tasks', {
    token: apiKey,
    headers: { 'idempotency-key': `quota-${++keys}` },
    body: { workflowName, workflowVersion: '1', name: workflowName, input },
  });

const mapOver = (key: string, items: string, dependsOn: string[] = []) => ({
  key,
  kind: 'map',
  dependsOn,
  map: { items, capability: 'quota.detect', capabilityVersion: '1' },
});

async function applicationWith(...workflows: unknown[]) {
  const app = await h.createApplication();
  for (const body of workflows) {
    const published = await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
  }
  return app;
}

describe('map items', () => {
  it('refuses at create a map over the input with more items than a step or the task may have', async () => {
    const app = await applicationWith(
      { name: 'one-map', version: '1', steps: [mapOver('each', '$.input.frames')] },
      {
        name: 'two-maps',
        version: '1',
        steps: [mapOver('first', '$.input.a'), mapOver('second', '$.input.b')],
      },
    );
    const before = await refused('MAP_ITEMS_LIMIT');
    const tooMany = await submit(app.apiKey, 'one-map', { frames: [1, 2, 3, 4, 5, 6] });
    expect(tooMany.status).toBe(422);
    expect(tooMany.body).toMatchObject({ code: 'MAP_ITEMS_LIMIT', retryable: false });
    expect(tooMany.body.detail).toContain('at most 5');
    // Each map within the step limit, but 5 + 4 items pass the task's 8.
    const together = await submit(app.apiKey, 'two-maps', { a: [1, 2, 3, 4, 5], b: [1, 2, 3, 4] });
    expect(together.status).toBe(422);
    expect(together.body.code).toBe('MAP_ITEMS_LIMIT');
    expect(await refused('MAP_ITEMS_LIMIT')).toBe(before + 2);
    // At the limits, accepted.
    expect((await submit(app.apiKey, 'one-map', { frames: [1, 2, 3, 4, 5] })).status).toBe(201);
    expect((await submit(app.apiKey, 'two-maps', { a: [1, 2, 3, 4, 5], b: [1, 2, 3] })).status).toBe(201);
  });

  it('fails a map step over an upstream output with too many items, not retryable', async () => {
    const app = await applicationWith({
      name: 'map-after-extract',
      version: '1',
      steps: [
        {
          key: 'extract',
          capability: 'quota.extract',
          capabilityVersion: '1',
          inputMapping: { count: '$.input.count' },
        },
        mapOver('detect', '$.steps.extract.output.frames', ['extract']),
      ],
    });
    const before = await refused('MAP_ITEMS_LIMIT');
    const over = (await submit(app.apiKey, 'map-after-extract', { count: 6 })).body.task.id;
    const within = (await submit(app.apiKey, 'map-after-extract', { count: 5 })).body.task.id;
    const task = async (id: string) =>
      (await h.request('GET', `/v1/tasks/${id}`, { token: app.apiKey })).body;
    await expect
      .poll(async () => (await task(over)).task.lifecycleStatus, { timeout: 20_000 })
      .toBe('FAILED');
    const step = (await task(over)).execution.steps.find((s: any) => (s.stepId ?? s.key) === 'detect');
    expect(step.error).toMatchObject({ code: 'MAP_ITEMS_LIMIT', retryable: false });
    expect(step.error.userMessage).toContain('at most 5');
    // Five items are within the limit: the map begins and waits for its items.
    await expect
      .poll(
        async () =>
          (await task(within)).execution.steps.find((s: any) => (s.stepId ?? s.key) === 'detect')?.waitingFor
            ?.total,
        { timeout: 20_000 },
      )
      .toBe(5);
    expect(await refused('MAP_ITEMS_LIMIT')).toBe(before + 1);
  });
});

describe('tasks in flight', () => {
  it("refuses an application's create past its unfinished tasks with 429 and Retry-After, and no other application's", async () => {
    // No worker serves zipWorkflow's capabilities: its tasks stay pending.
    const busy = await applicationWith(zipWorkflow());
    const other = await applicationWith(zipWorkflow());
    const input = { sourceZip: 'asset://a1' };
    for (let i = 0; i < 3; i++)
      expect((await submit(busy.apiKey, 'zip-clean-watermark', input)).status).toBe(201);
    const lastKey = `quota-${keys}`;
    const before = await refused('TASKS_IN_FLIGHT_LIMIT');
    const refusedCreate = await submit(busy.apiKey, 'zip-clean-watermark', input);
    expect(refusedCreate.status).toBe(429);
    expect(refusedCreate.headers.get('content-type')).toContain('application/problem+json');
    expect(refusedCreate.body).toMatchObject({ code: 'TASKS_IN_FLIGHT_LIMIT', retryable: true });
    expect(refusedCreate.headers.get('retry-after')).toBe('5');
    expect(await refused('TASKS_IN_FLIGHT_LIMIT')).toBe(before + 1);
    // A retry of a create that was accepted still gets its task back, at the limit too.
    const retried = await h.request('POST', '/v1/tasks', {
      token: busy.apiKey,
      headers: { 'idempotency-key': lastKey },
      body: { workflowName: 'zip-clean-watermark', workflowVersion: '1', name: 'zip-clean-watermark', input },
    });
    expect(retried.status).toBe(200);
    // Another application of the same server is not held back.
    expect((await submit(other.apiKey, 'zip-clean-watermark', input)).status).toBe(201);
    // A finished (cancelled) task makes room again.
    const list = await h.request('GET', '/v1/tasks', { token: busy.apiKey });
    const first = list.body.items[0].id ?? list.body.items[0].task?.id;
    const cancelled = await h.request('POST', `/v1/tasks/${first}:cancel`, {
      token: busy.apiKey,
      headers: { 'idempotency-key': `cancel-${first}` },
      body: {},
    });
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBeLessThan(300);
    await expect
      .poll(async () => (await submit(busy.apiKey, 'zip-clean-watermark', input)).status, { timeout: 10_000 })
      .toBe(201);
  });
});

describe('schedules', () => {
  const schedule = (apiKey: string, cron: string) =>
    h.request('POST', '/v1/schedules', {
      token: apiKey,
      headers: { 'idempotency-key': `schedule-${++keys}` },
      body: {
        cron,
        timeZone: 'UTC',
        workflowName: 'zip-clean-watermark',
        workflowVersion: '1',
        input: { sourceZip: 'asset://a1' },
        overlap: 'ALLOW',
      },
    });

  it('refuses a schedule that fires more often than the minimum interval with 422 SCHEDULE_TOO_FREQUENT', async () => {
    const app = await applicationWith(zipWorkflow());
    const before = await refused('SCHEDULE_TOO_FREQUENT');
    // Every second; every 30 s; and twice 30 s apart once an hour (dense only for a moment).
    for (const cron of ['* * * * * *', '*/30 * * * * *', '0,30 0 * * * *']) {
      const res = await schedule(app.apiKey, cron);
      expect(res.status, cron).toBe(422);
      expect(res.body).toMatchObject({ code: 'SCHEDULE_TOO_FREQUENT', retryable: false });
      expect(res.body.errors[0].path).toBe('/cron');
    }
    expect(await refused('SCHEDULE_TOO_FREQUENT')).toBe(before + 3);
    expect((await schedule(app.apiKey, '* * * * *')).status).toBe(201);
  });

  it("refuses an application's schedule past its limit with 422 SCHEDULE_LIMIT, and no other application's", async () => {
    const app = await applicationWith(zipWorkflow());
    const other = await applicationWith(zipWorkflow());
    expect((await schedule(app.apiKey, '0 * * * *')).status).toBe(201);
    expect((await schedule(app.apiKey, '0 9 * * *')).status).toBe(201);
    const before = await refused('SCHEDULE_LIMIT');
    const third = await schedule(app.apiKey, '0 10 * * *');
    expect(third.status).toBe(422);
    expect(third.body).toMatchObject({ code: 'SCHEDULE_LIMIT', retryable: false });
    expect(await refused('SCHEDULE_LIMIT')).toBe(before + 1);
    expect((await schedule(other.apiKey, '0 10 * * *')).status).toBe(201);
  });
});
