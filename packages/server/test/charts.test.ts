/**
 * The dashboard's charts (`GET /dashboard/api/charts`): task counts over time buckets from the task
 * table, exactly, for tasks created, started and finished at known times on the injected clock; and
 * the gauge sampler, which writes one row a minute however many replicas run it and drops old rows.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { attemptEvent, type StartCommand, startTestWorker } from '../../../test/testWorker.ts';

const minute = 60_000;
/**
 * The next whole hour of the real clock: every bucket below is a known minute, and what a replica
 * sampled at start-up (on the real clock) is older than all of it.
 */
const hourStart = Math.floor(Date.now() / 3600_000) * 3600_000 + 3600_000;
const at = (minutes: number, seconds = 0) => new Date(hourStart + minutes * minute + seconds * 1000);

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let cookie: string;

const operatorCookie = async (harness: Harness) => {
  const login = await fetch(`${harness.url}/dashboard/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token: harness.adminToken }),
  });
  return login.headers.get('set-cookie')!.split(';')[0]!;
};

const charts = async (range?: string, harness = h, session = cookie) => {
  const response = await fetch(`${harness.url}/dashboard/api/charts${range ? `?range=${range}` : ''}`, {
    headers: { cookie: session },
  });
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    body: (await response.json()) as any,
  };
};

const submit = async (workflowName: string, harness = h, application = app) => {
  const created = await harness.request('POST', '/v1/tasks', {
    token: application.apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName, workflowVersion: '1', name: 'charted', input: {} },
  });
  expect(created.status).toBe(201);
  return created.body.task.id as string;
};

/** Waits for what the server does in the background (its loops, the command stream). */
const soon = { timeout: 10_000, interval: 20 };

/** An application with two one-step workflows: one a worker of the tests serves, one nobody does. */
const setUp = async (harness: Harness) => {
  const application = await harness.createApplication();
  for (const [name, capability] of [
    ['chart-work', 'chart.work'],
    ['chart-unplaceable', 'chart.nobody'],
  ])
    await harness.request('POST', '/v1/workflow-definitions', {
      token: application.apiKey,
      body: { name, version: '1', steps: [{ key: 'only', capability, capabilityVersion: '1' }] },
    });
  return application;
};

beforeAll(async () => {
  // Without loops, a task is placed only at its create, from the worker snapshot of the last second;
  // under a loaded CI, a submit can come later than that and its step would wait for a scheduler that
  // does not run here. The snapshot stays fresh for the test (a worker change still renews it).
  // The test clock moves by tens of minutes: the operator's session must outlast it.
  h = await startHarness({
    settings: { workerCandidatesMaxAgeMs: 600_000, dashboardSessionIdleSeconds: 86_400 },
  });
  h.clock.set(at(0));
  app = await setUp(h);
  cookie = await operatorCookie(h);
});
afterAll(async () => {
  await h?.close();
});

describe('GET /dashboard/api/charts', () => {
  it('counts tasks created, started and finished per minute bucket, exactly', async () => {
    const workerKey = (
      await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
    ).body.key as string;
    const commands = new Map<string, StartCommand>();
    // Minute 10: three tasks; minute 11: two more. Two of the first start in minute 11, 75 s and 95 s
    // after their submission, and finish in minute 12.
    h.clock.set(at(10, 5));
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-charts',
      capabilities: [{ name: 'chart.work', version: '1' }],
      maxConcurrency: 10,
      handler: async (command) => {
        commands.set(command.taskId, command);
      },
    });
    const [first, second] = [
      await submit('chart-work'),
      await submit('chart-work'),
      await submit('chart-work'),
    ];
    await expect.poll(() => commands.has(first!) && commands.has(second!), soon).toBe(true);
    const report = async (taskId: string, events: (command: StartCommand) => Record<string, unknown>[]) => {
      await worker.heartbeat();
      const answer = await worker.report(events(commands.get(taskId)!));
      expect(JSON.stringify(answer)).not.toContain('REJECTED');
    };
    h.clock.set(at(11, 20));
    await report(first!, (c) => [attemptEvent(c, 'STEP_STARTED', 1)]);
    h.clock.set(at(11, 30));
    await submit('chart-work');
    await submit('chart-work');
    h.clock.set(at(11, 40));
    await report(second!, (c) => [attemptEvent(c, 'STEP_STARTED', 1)]);
    h.clock.set(at(12, 10));
    for (const taskId of [first!, second!])
      await report(taskId, (c) => [attemptEvent(c, 'STEP_COMPLETED', 2, { output: {}, durationMs: 1 })]);
    await worker.stop();

    h.clock.set(at(30, 15));
    const { status, body } = await charts('hour');
    expect(status).toBe(200);
    expect(body.bucketSeconds).toBe(60);
    expect(body.times).toHaveLength(60);
    // The last bucket holds now; the first is 59 minutes before it, on the minute.
    expect(body.times.at(-1)).toBe(at(30).getTime() / 1000);
    expect(body.times[0]).toBe(at(-29).getTime() / 1000);
    const index = (minutes: number) => body.times.indexOf(at(minutes).getTime() / 1000);
    const only = (series: (number | null)[], expected: Record<number, number>, empty: number | null) =>
      expect(series).toEqual(
        body.times.map(
          (_: number, i: number) =>
            Object.entries(expected).find(([m]) => index(Number(m)) === i)?.[1] ?? empty,
        ),
      );
    only(body.series.created, { 10: 3, 11: 2 }, 0);
    only(body.series.finished, { 12: 2 }, 0);
    // Submit→start of the two started in minute 11: 75 s and 95 s (percentiles interpolate).
    only(body.series.submitToStartP50Ms, { 11: 85_000 }, null);
    only(body.series.submitToStartP99Ms, { 11: 94_800 }, null);

    // The day: ten-minute buckets, the same tasks in the bucket of minute 10.
    const day = (await charts('day')).body;
    expect(day.bucketSeconds).toBe(600);
    expect(day.times).toHaveLength(144);
    const tenth = day.times.indexOf(at(10).getTime() / 1000);
    expect(day.series.created[tenth]).toBe(5);
    expect(day.series.finished[tenth]).toBe(2);
    expect(day.series.created.reduce((a: number, b: number) => a + b, 0)).toBe(5);
    expect(day.series.submitToStartP50Ms[tenth]).toBe(85_000);
  });

  it('answers a range it does not know with a 400 problem, and no session with a 401', async () => {
    const wrong = await charts('week');
    expect(wrong.status).toBe(400);
    expect(wrong.type).toContain('application/problem+json');
    expect(wrong.body.code).toBe('VALIDATION_FAILED');
    const anonymous = await fetch(`${h.url}/dashboard/api/charts`);
    expect(anonymous.status).toBe(401);
  });
});

describe('the chart sampler', () => {
  it('writes one sample a minute with two replicas, with the gauges of that minute, and drops old ones', async () => {
    // A database of its own (no tasks of the test above), served by two replicas running the loops.
    const base = await startHarness();
    const settings = { chartSampleIntervalMs: 20 };
    const replicas = [
      await startHarness({ runLoops: true, settings, sharedDatabaseUrl: base.databaseUrl }),
      await startHarness({ runLoops: true, settings, sharedDatabaseUrl: base.databaseUrl }),
    ];
    // The replicas' clocks move together, as machines' clocks do.
    const setClocks = (date: Date) => {
      for (const clock of [base.clock, ...replicas.map((r) => r.clock)]) clock.set(date);
    };
    setClocks(at(39));
    const application = await setUp(base);
    const session = await operatorCookie(base);
    // The minutes sampled from `from` on (the replicas sampled minute 39 and the real clock's too).
    const sampledMinutes = async (from = at(40)) =>
      (
        await base.server.sql<{ minute: Date }[]>`
          SELECT minute FROM metric_sample WHERE minute >= ${from} ORDER BY minute`
      ).map((r) => r.minute.toISOString());
    try {
      // Three tasks no worker can take: three steps waiting for a worker. Then minute 40 begins.
      setClocks(at(39, 50));
      for (let i = 0; i < 3; i += 1) await submit('chart-unplaceable', base, application);
      setClocks(at(40, 1));
      await expect.poll(() => sampledMinutes(), soon).toContain(at(40).toISOString());
      // Both replicas keep looking every 20 ms: still one row.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await sampledMinutes()).toEqual([at(40).toISOString()]);
      setClocks(at(41, 2));
      await expect.poll(() => sampledMinutes(), soon).toHaveLength(2);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await sampledMinutes()).toEqual([at(40).toISOString(), at(41).toISOString()]);

      const { body } = await charts('hour', base, session);
      const forty = body.times.indexOf(at(40).getTime() / 1000);
      expect(body.series.waitingForWorker[forty]).toBe(3);
      expect(body.series.queueDepth[forty]).toBe(3);
      expect(body.series.staleSteps[forty]).toBe(0);
      expect(body.series.callbackDead[forty]).toBe(0);
      // Minute 38, which nobody sampled (minute 39 was), has no gauge: a gap, not a zero.
      expect(body.series.waitingForWorker[forty - 2]).toBeNull();

      // Two days and a minute later the old samples are gone, the new minute's is there.
      const later = new Date(at(41).getTime() + 2 * 24 * 3600_000 + minute);
      setClocks(new Date(later.getTime() + 3_000));
      await expect.poll(() => sampledMinutes(), soon).toContain(later.toISOString());
      expect(await sampledMinutes(new Date(0))).toEqual([later.toISOString()]);
    } finally {
      for (const replica of replicas) await replica.close();
      await base.close();
    }
  });
});
