/**
 * Fair placement through the real server: waiting steps of two tenants get capacity in turns whatever
 * the order and the number they were submitted in, a platform operator's weight shifts the shares, and
 * within an application priority ages — a low-priority step is not starved by a steady high-priority
 * flood; a customer's flood inside one application takes turns beside the application's other customers
 * (fairness keys). The worker takes one attempt at a time, so the order the steps start in is the order the
 * scheduler placed them.
 */
import { newId } from '@tdp/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { attemptEvent, startTestWorker } from '../../../test/testWorker.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let harness: Harness;
let ticking: NodeJS.Timeout;

async function start(settings: Record<string, unknown> = {}) {
  harness = await startHarness({
    runLoops: true,
    settings: { commandPollIntervalMs: 20, retryUnplaceableMs: 100, ...settings },
  });
  // The test clock keeps up with real time (deferred requests come due).
  ticking = setInterval(() => harness.clock.advance(20), 20);
}
afterEach(async () => {
  clearInterval(ticking);
  await harness.close();
});

const workflow = {
  name: 'fair',
  version: '1',
  inputSchema: { type: 'object', required: ['who'], properties: { who: { type: 'string' } } },
  steps: [
    {
      key: 'work',
      capability: 'fair.work',
      capabilityVersion: '1',
      inputMapping: { who: '$.input.who' },
    },
  ],
};

async function application() {
  const app = await harness.createApplication();
  const published = await harness.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: workflow,
  });
  expect(published.status, JSON.stringify(published.body)).toBe(201);
  return app;
}

function create(apiKey: string, who: string, priority?: number, fairness?: { key: string; weight?: number }) {
  return harness.request('POST', '/v1/tasks', {
    token: apiKey,
    headers: { 'idempotency-key': newId() },
    body: {
      workflowName: 'fair',
      workflowVersion: '1',
      name: who,
      input: { who },
      ...(priority !== undefined ? { priority } : {}),
      ...(fairness ? { fairness } : {}),
    },
  });
}

/** One attempt at a time; `order` is who started, in order. */
async function startWorker(holdMs: number) {
  const order: string[] = [];
  const workerKey = (
    await harness.request('POST', '/admin/v1/worker-credentials', {
      token: harness.adminToken,
      body: { label: 'fair' },
    })
  ).body.key;
  const worker = await startTestWorker({
    baseUrl: harness.url,
    workerKey,
    nodeId: 'fair-node',
    capabilities: [{ name: 'fair.work', version: '1' }],
    maxConcurrency: 1,
    handler: async (command, report) => {
      order.push(String((command.input as { who: string }).who));
      await report([attemptEvent(command, 'STEP_STARTED', 1)]);
      await sleep(holdMs);
      await report([attemptEvent(command, 'STEP_COMPLETED', 2, { output: {}, durationMs: holdMs })]);
    },
  });
  return { order, worker };
}

describe('fair placement between tenants', () => {
  beforeEach(() => start());

  it('gives a quiet tenant its turns beside a backlog ten times its size submitted before it', async () => {
    const noisy = await application();
    const quiet = await application();
    for (let i = 0; i < 40; i += 1) expect((await create(noisy.apiKey, 'noisy')).status).toBe(201);
    for (let i = 0; i < 4; i += 1) expect((await create(quiet.apiKey, 'quiet')).status).toBe(201);
    // Let the scheduler see them all (no worker yet: they wait), then give it capacity.
    await sleep(300);
    const { order, worker } = await startWorker(5);
    try {
      await expect.poll(() => order.length, { timeout: 60_000, interval: 50 }).toBe(44);
    } finally {
      await worker.stop();
    }
    // In arrival order the quiet tenant would start 41st to 44th; in turns, all four start among the
    // first ten (alternating with the noisy one, give or take the round that was in flight).
    const quietPositions = order.flatMap((who, i) => (who === 'quiet' ? [i] : []));
    expect(quietPositions).toHaveLength(4);
    expect(Math.max(...quietPositions)).toBeLessThan(10);
  }, 90_000);

  it("shares capacity by the operator's weights", async () => {
    const heavy = await application();
    const light = await application();
    const weighed = await harness.request('PUT', `/admin/v1/tenants/${heavy.tenantId}/scheduling-weight`, {
      token: harness.adminToken,
      body: { weight: 3, reason: 'paid tier' },
    });
    expect(weighed.status, JSON.stringify(weighed.body)).toBe(200);
    for (let i = 0; i < 30; i += 1) {
      expect((await create(heavy.apiKey, 'heavy')).status).toBe(201);
      expect((await create(light.apiKey, 'light')).status).toBe(201);
    }
    await sleep(300);
    const { order, worker } = await startWorker(5);
    try {
      await expect.poll(() => order.length, { timeout: 60_000, interval: 50 }).toBe(60);
    } finally {
      await worker.stop();
    }
    // Weight 3 against 1: three of every four of the first 24 starts are the heavy tenant's (± 3).
    const heavyFirst = order.slice(0, 24).filter((who) => who === 'heavy').length;
    expect(heavyFirst).toBeGreaterThanOrEqual(15);
    expect(heavyFirst).toBeLessThanOrEqual(21);
  }, 90_000);
});

describe('priority within an application', () => {
  // One priority level counts as 40 ms of waiting: priority 10 is worth 400 ms.
  beforeEach(() => start({ priorityAgingStepMs: 40 }));

  it('orders by priority, and a low-priority step starts within its bound under a high-priority flood', async () => {
    const app = await application();
    const { order, worker } = await startWorker(25);
    try {
      // Keep the worker busy, then submit the low-priority step and a steady flood of priority 10.
      for (let i = 0; i < 3; i += 1) await create(app.apiKey, 'busy', 10);
      const startedAt = Date.now();
      const low = await create(app.apiKey, 'low', 0);
      expect(low.status).toBe(201);
      // Times as the server's clock tells them (the test clock, which follows real time in ticks).
      const lowAt = Date.parse(low.body.task.createdAt);
      const flood: number[] = [];
      while (!order.includes('low') && Date.now() - startedAt < 20_000) {
        const high = await create(app.apiKey, `high-${flood.length + 1}`, 10);
        flood.push(Date.parse(high.body.task.createdAt));
        await sleep(10);
      }
      expect(order).toContain('low');
      // High-priority steps submitted well past the bound (10 levels × 40 ms) after the low one come
      // after it: at most the flood of the first 400 ms starts before it (+ slack for the rounds in
      // flight). Without aging it would wait for the whole flood (20 s).
      const before = order.slice(0, order.indexOf('low')).filter((who) => who.startsWith('high-'));
      const submittedWithinBound = flood.filter((at) => at - lowAt <= 400).length;
      expect(before.length).toBeGreaterThan(0);
      expect(before.length).toBeLessThanOrEqual(submittedWithinBound + 3);
      expect(Date.now() - startedAt).toBeLessThan(10_000);
    } finally {
      await worker.stop();
    }
  }, 90_000);
});

describe('fair placement between an application’s fairness keys', () => {
  beforeEach(() => start());

  it('gives a quiet customer its turns beside a backlog of another customer submitted before it', async () => {
    const app = await application();
    for (let i = 0; i < 30; i += 1)
      expect((await create(app.apiKey, 'flooding', undefined, { key: 'customer-1' })).status).toBe(201);
    for (let i = 0; i < 3; i += 1)
      expect((await create(app.apiKey, 'quiet', undefined, { key: 'customer-2' })).status).toBe(201);
    await sleep(300);
    const { order, worker } = await startWorker(5);
    try {
      await expect.poll(() => order.length, { timeout: 60_000, interval: 50 }).toBe(33);
    } finally {
      await worker.stop();
    }
    // In arrival order the quiet customer would start 31st to 33rd; in turns, among the first eight.
    const quietPositions = order.flatMap((who, i) => (who === 'quiet' ? [i] : []));
    expect(quietPositions).toHaveLength(3);
    expect(Math.max(...quietPositions)).toBeLessThan(8);
  }, 90_000);

  it("shares an application's turns by its keys' weights: the create's, or an operator's instead", async () => {
    const app = await application();
    // The operator's weight 3 for customer-p takes the place of the 1 its tasks are created with;
    // customer-w's tasks carry a weight of 3 themselves; customer-1 has the default.
    const weighed = await harness.request(
      'PUT',
      `/admin/v1/applications/${app.applicationId}/fairness-keys/customer-p/weight`,
      { token: harness.adminToken, body: { weight: 3, reason: 'paid tier' } },
    );
    expect(weighed.status, JSON.stringify(weighed.body)).toBe(200);
    expect(weighed.body).toMatchObject({ scope: 'key', id: `${app.applicationId}:customer-p`, weight: 3 });
    for (let i = 0; i < 20; i += 1) {
      expect((await create(app.apiKey, 'p', undefined, { key: 'customer-p', weight: 1 })).status).toBe(201);
      expect((await create(app.apiKey, 'w', undefined, { key: 'customer-w', weight: 3 })).status).toBe(201);
      expect((await create(app.apiKey, 'one', undefined, { key: 'customer-1' })).status).toBe(201);
    }
    await sleep(300);
    const { order, worker } = await startWorker(5);
    try {
      await expect.poll(() => order.length, { timeout: 60_000, interval: 50 }).toBe(60);
    } finally {
      await worker.stop();
    }
    // 3 : 3 : 1 over the first 21 starts: 9, 9 and 3 (± 2).
    const first = order.slice(0, 21);
    const count = (who: string) => first.filter((w) => w === who).length;
    expect(count('p')).toBeGreaterThanOrEqual(7);
    expect(count('w')).toBeGreaterThanOrEqual(7);
    expect(count('one')).toBeLessThanOrEqual(5);
  }, 90_000);

  it('refuses a fairness key that is empty and a weight of 0 or above 1000, creating nothing', async () => {
    const app = await application();
    for (const fairness of [{ key: '' }, { key: 'c', weight: 0 }, { key: 'c', weight: 1001 }]) {
      const refused = await create(app.apiKey, 'bad', undefined, fairness);
      expect(refused.status, JSON.stringify(fairness)).toBe(400);
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
    }
    const listed = await harness.request('GET', '/v1/tasks', { token: app.apiKey });
    expect(listed.body.items).toHaveLength(0);
  });
});
