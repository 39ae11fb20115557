/**
 * Rate limits on a real server: a token bucket per application (its API key and the user tokens it
 * mints), per worker key and per execution token, on the harness's clock. Buckets refill only when the
 * test moves the clock, so every count here is exact.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newId } from '../../../packages/protocol/src/ids.ts';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { coordinator } from '../../../test/statusFixture.ts';
import { connectDatabase } from '../src/main.ts';

const BURST = 4;
let h: Harness;
const logLines: string[] = [];
let sql: ReturnType<typeof connectDatabase>;

const taskBody = {
  workflowName: 'zip-clean-watermark',
  workflowVersion: '1',
  name: 'limited',
  input: { sourceZip: 'asset://a1' },
};

async function newApplication() {
  const app = await h.createApplication();
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: zipWorkflow(),
  });
  expect(published.status).toBe(201);
  return app;
}

const createTask = (apiKey: string, idempotencyKey = newId()) =>
  h.request('POST', '/v1/tasks', {
    token: apiKey,
    headers: { 'idempotency-key': idempotencyKey },
    body: taskBody,
  });

const tasksOf = async (applicationId: string) =>
  Number((await sql`SELECT count(*) AS n FROM task WHERE application_id = ${applicationId}`)[0]!.n);

/** `tdp_rate_limited_total{credential}` as /metrics shows it. */
async function refusals(credential: string): Promise<number> {
  const text = (await h.request('GET', '/metrics')).body as string;
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`tdp_rate_limited_total{credential="${credential}"}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

function expectRateLimited(res: Awaited<ReturnType<Harness['request']>>, credential: string) {
  expect(res.status).toBe(429);
  expect(res.headers.get('content-type')).toContain('application/problem+json');
  expect(res.body).toMatchObject({ code: 'RATE_LIMITED', status: 429, retryable: true });
  expect(res.headers.get('retry-after')).toBe('1');
  expect(res.headers.get('ratelimit')).toBe(`"${credential}";r=0;t=1`);
  expect(res.headers.get('ratelimit-policy')).toBe(`"${credential}";q=${BURST};w=${BURST}`);
}

beforeAll(async () => {
  const policy = { perSecond: 1, burst: BURST };
  const logger = pino({ level: 'warn' }, { write: (line: string) => void logLines.push(line) });
  h = await startHarness({
    logger,
    settings: { rateLimits: { application: policy, worker: policy, execution: policy } },
  });
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
});

// Every test starts with full buckets: a minute refills any of them.
beforeEach(() => h.clock.advance(60_000));

afterAll(async () => {
  await sql.end();
  await h.close();
});

describe('per application', () => {
  it('an emptied bucket answers 429 RATE_LIMITED with Retry-After, creates nothing, and is counted', async () => {
    const app = await newApplication();
    h.clock.advance(60_000);
    for (let i = 0; i < BURST; i += 1) expect((await createTask(app.apiKey)).status).toBe(201);
    const before = await refusals('application');

    const refusedKey = newId();
    expectRateLimited(await createTask(app.apiKey, refusedKey), 'application');
    expectRateLimited(await h.request('GET', '/v1/tasks', { token: app.apiKey }), 'application');
    expect(await tasksOf(app.applicationId)).toBe(BURST);
    expect(await refusals('application')).toBe(before + 2);
    // A run of refusals is logged once, by the application's id and never its key.
    const logged = logLines.filter((l) => l.includes('rate limit reached') && l.includes(app.applicationId));
    expect(logged).toHaveLength(1);
    expect(JSON.parse(logged[0]!)).toMatchObject({ level: 40, credential: 'application' });
    expect(logLines.join('\n')).not.toContain(app.apiKey.slice(-12));

    // The refused Idempotency-Key was not used up: once a token is back, the same request creates the task.
    h.clock.advance(1_000);
    expect((await createTask(app.apiKey, refusedKey)).status).toBe(201);
    expect(await tasksOf(app.applicationId)).toBe(BURST + 1);
  });

  it('another application is not affected', async () => {
    const first = await newApplication();
    const second = await newApplication();
    h.clock.advance(60_000);
    for (let i = 0; i < BURST; i += 1) expect((await createTask(first.apiKey)).status).toBe(201);
    expectRateLimited(await createTask(first.apiKey), 'application');
    expect((await createTask(second.apiKey)).status).toBe(201);
    expect((await h.request('GET', '/v1/tasks', { token: second.apiKey })).status).toBe(200);
  });

  it('refills on the clock: one token a second', async () => {
    const app = await newApplication();
    h.clock.advance(60_000);
    for (let i = 0; i < BURST; i += 1) expect((await createTask(app.apiKey)).status).toBe(201);
    expectRateLimited(await createTask(app.apiKey), 'application');
    h.clock.advance(999);
    expectRateLimited(await createTask(app.apiKey), 'application');
    h.clock.advance(1);
    expect((await createTask(app.apiKey)).status).toBe(201);
    expectRateLimited(await createTask(app.apiKey), 'application');
    h.clock.advance(2_000);
    expect((await createTask(app.apiKey)).status).toBe(201);
    expect((await createTask(app.apiKey)).status).toBe(201);
    expectRateLimited(await createTask(app.apiKey), 'application');
  });

  it("the user tokens an application mints draw on the application's bucket", async () => {
    const app = await newApplication();
    const minted = await h.request('POST', '/v1/user-tokens', { token: app.apiKey, body: { userId: 'u-1' } });
    expect(minted.status).toBe(201);
    const userToken = minted.body.token as string;
    h.clock.advance(60_000);
    for (let i = 0; i < BURST - 1; i += 1) expect((await createTask(app.apiKey)).status).toBe(201);
    expect((await h.request('GET', '/v1/me/tasks', { token: userToken })).status).toBe(200);
    expectRateLimited(await h.request('GET', '/v1/me/tasks', { token: userToken }), 'application');
    expectRateLimited(await createTask(app.apiKey), 'application');
  });
});

describe('per worker key', () => {
  const newWorker = async () => {
    const key = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
      .body.key as string;
    const registered = await h.request('POST', '/v1/workers/register', {
      token: key,
      body: {
        instanceId: newId(),
        name: 'limited',
        nodeId: `node-${newId()}`,
        capabilities: [{ name: 'limited.op', version: '1' }],
      },
    });
    expect(registered.status).toBe(201);
    return { key, workerId: registered.body.workerId as string };
  };
  // A report that acknowledges a command this worker does not have: accepted, changes nothing.
  const report = (worker: { key: string; workerId: string }) =>
    h.request('POST', `/v1/workers/${worker.workerId}/events:batch`, {
      token: worker.key,
      body: { events: [], commandAcks: [newId()] },
    });

  it("a worker's reports are throttled on their own bucket, apart from tasks and other workers", async () => {
    const app = await newApplication();
    const worker = await newWorker();
    const other = await newWorker();
    h.clock.advance(60_000);
    const before = await refusals('worker');
    for (let i = 0; i < BURST; i += 1) expect((await report(worker)).status).toBe(200);
    expectRateLimited(await report(worker), 'worker');
    expectRateLimited(
      await h.request('POST', `/v1/workers/${worker.workerId}/heartbeat`, { token: worker.key }),
      'worker',
    );
    expect(await refusals('worker')).toBe(before + 2);

    expect((await report(other)).status).toBe(200);
    expect((await createTask(app.apiKey)).status).toBe(201);
    h.clock.advance(1_000);
    expect((await report(worker)).status).toBe(200);
  });
});

describe('per execution token', () => {
  it("an execution's reports are throttled on its own bucket; the refused event is not recorded", async () => {
    const co = await coordinator(h);
    const { ctx } = await co.runningContext();
    const { ctx: other } = await co.runningContext();
    h.clock.advance(60_000);
    const progress = (context: typeof ctx, seq: number) =>
      co.report(
        context,
        co.event(context, { sourceSeq: seq, eventType: 'STEP_PROGRESS', progress: { percent: seq } }),
      );
    // A batch with the token in the header and in its item too: one request, one charge.
    const batchedProgress = async (context: typeof ctx, seq: number) => {
      const event = co.event(context, { sourceSeq: seq, eventType: 'STEP_PROGRESS' });
      const res = await co.call(
        'POST',
        '/v1/task-events:batch',
        { events: [{ ...event, executionToken: context.executionToken }] },
        undefined,
        context.executionToken,
      );
      expect(res.body.results?.[0]?.ok).toBe(true);
      return res;
    };
    const events = async () =>
      Number((await sql`SELECT count(*) AS n FROM task_event WHERE task_id = ${ctx.taskId}`)[0]!.n);
    const before = await refusals('execution');
    for (let seq = 1; seq <= BURST; seq += 1) {
      const report = seq % 2 === 0 ? batchedProgress : progress;
      expect((await report(ctx, seq)).status).toBe(200);
    }
    const recorded = await events();
    expectRateLimited(await progress(ctx, BURST + 1), 'execution');
    expect(await events()).toBe(recorded);
    expect(await refusals('execution')).toBe(before + 1);

    expect((await progress(other, 1)).status).toBe(200);
    // The coordinator's API key is another bucket.
    expect((await h.request('GET', `/v1/tasks/${ctx.taskId}`, { token: co.app.apiKey })).status).toBe(200);
    h.clock.advance(1_000);
    expect((await progress(ctx, BURST + 1)).status).toBe(200);
    expect(await events()).toBe(recorded + 1);
  });
});

describe('OpenAPI', () => {
  it('documents the 429 on the limited routes as problem+json, not on the admin API', async () => {
    const spec = (await h.request('GET', '/openapi.json')).body;
    expect(spec.paths['/v1/tasks'].post.responses['429']).toMatchObject({
      headers: { 'retry-after': { schema: { type: 'integer' } } },
    });
    // As it is on the wire (the fuzzer found a 429 documented as application/json).
    expect(Object.keys(spec.paths['/v1/tasks'].post.responses['429'].content)).toEqual([
      'application/problem+json',
    ]);
    expect(spec.paths['/v1/task-events'].post.responses['429']).toBeDefined();
    expect(spec.paths['/admin/v1/tenants'].post.responses['429']).toBeUndefined();
  });
});
