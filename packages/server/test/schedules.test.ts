/** Schedules on a real server and database: the API, firing on an injected clock, replicas, catch-up, overlap. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let sql: ReturnType<typeof connectDatabase>;
const input = { sourceZip: 'asset://a1' };
let keys = 0;
/** Rounds run on a shared 2-core machine: give the loop time, not a fixed deadline of 1 s. */
const patience = { timeout: 15_000 };

const scheduleBody = (overrides: Record<string, unknown> = {}) => ({
  cron: '0 * * * *',
  timeZone: 'UTC',
  workflowName: 'zip-clean-watermark',
  workflowVersion: '1',
  input,
  overlap: 'ALLOW',
  ...overrides,
});

async function createSchedule(on: Harness, overrides: Record<string, unknown> = {}, token = app.apiKey) {
  const res = await on.request('POST', '/v1/schedules', {
    token,
    headers: { 'idempotency-key': `schedule-${++keys}` },
    body: scheduleBody(overrides),
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { id: string; nextFireAt: string };
}

/** The tasks a schedule started, oldest first. */
async function tasksOf(
  scheduleId: string,
): Promise<{ id: string; name: string; lifecycle_status: string }[]> {
  return sql`
    SELECT id, name, lifecycle_status FROM task WHERE external_ref = ${`schedule:${scheduleId}`}
    ORDER BY created_at, name`;
}

const schedule = async (on: Harness, id: string, token = app.apiKey) =>
  (await on.request('GET', `/v1/schedules/${id}`, { token })).body;

const pause = (id: string) => h.request('POST', `/v1/schedules/${id}:pause`, { token: app.apiKey });

beforeAll(async () => {
  // One test fires every second: below the default minimum interval (60 s), allowed here.
  h = await startHarness({ runLoops: true, settings: { scheduleMinIntervalSeconds: 1 } });
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
  app = await h.createApplication();
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: zipWorkflow(),
  });
  expect(published.status).toBe(201);
});

afterAll(async () => {
  await sql.end();
  await h.close();
});

describe('the schedules API', () => {
  it('creates, replays, lists with next fire times in the time zone, pauses and resumes', async () => {
    h.clock.set(new Date('2030-01-01T00:00:00Z'));
    const body = scheduleBody({ cron: '0 9 * * *', timeZone: 'Europe/Paris', overlap: 'SKIP' });
    const created = await h.request('POST', '/v1/schedules', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'api-1' },
      body,
    });
    expect(created.status).toBe(201);
    // 09:00 in Paris in winter is 08:00 UTC.
    expect(created.body.nextFireAt).toBe('2030-01-01T08:00:00.000Z');
    expect(created.body.nextFireTimes.slice(0, 2)).toEqual([
      '2030-01-01T08:00:00.000Z',
      '2030-01-02T08:00:00.000Z',
    ]);
    const replay = await h.request('POST', '/v1/schedules', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'api-1' },
      body,
    });
    expect(replay.status).toBe(200);
    expect(replay.body.id).toBe(created.body.id);
    const reused = await h.request('POST', '/v1/schedules', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'api-1' },
      body: { ...body, cron: '0 10 * * *' },
    });
    expect(reused.status).toBe(409);
    expect(reused.body.code).toBe('IDEMPOTENCY_KEY_REUSED');

    const listed = await h.request('GET', '/v1/schedules', { token: app.apiKey });
    expect(listed.status).toBe(200);
    const mine = listed.body.schedules.find((s: { id: string }) => s.id === created.body.id);
    expect(mine.nextFireTimes).toHaveLength(5);

    const paused = await pause(created.body.id);
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ paused: true, nextFireTimes: [] });
    // Resumed on the 3rd at noon UTC: the fires while paused are not caught up.
    h.clock.set(new Date('2030-01-03T12:00:00Z'));
    const resumed = await h.request('POST', `/v1/schedules/${created.body.id}:resume`, { token: app.apiKey });
    expect(resumed.status).toBe(200);
    expect(resumed.body).toMatchObject({ paused: false, nextFireAt: '2030-01-04T08:00:00.000Z' });
    await pause(created.body.id);

    const other = await h.createApplication();
    const hidden = await h.request('GET', `/v1/schedules/${created.body.id}`, { token: other.apiKey });
    expect(hidden.status).toBe(404);
    expect(hidden.body.code).toBe('SCHEDULE_NOT_FOUND');
  });

  it('refuses a cron expression that does not parse with 400 naming the field, and stores nothing', async () => {
    const [before] = await sql`SELECT count(*)::int AS n FROM schedule`;
    for (const cron of ['61 * * * *', 'every day']) {
      const res = await h.request('POST', '/v1/schedules', {
        token: app.apiKey,
        headers: { 'idempotency-key': `bad-cron-${cron}` },
        body: scheduleBody({ cron }),
      });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
      expect(res.body.code).toBe('CRON_EXPRESSION_INVALID');
      expect(res.body.errors).toEqual([expect.objectContaining({ path: '/cron' })]);
      if (cron.startsWith('61')) expect(res.body.errors[0].message).toBe('Invalid value for minute: 61');
    }
    const unknown = await h.request('POST', '/v1/schedules', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'unknown-workflow' },
      body: scheduleBody({ workflowName: 'no-such-workflow' }),
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.code).toBe('UNKNOWN_WORKFLOW');
    const badZone = await h.request('POST', '/v1/schedules', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'bad-zone' },
      body: scheduleBody({ timeZone: 'Mars/Olympus' }),
    });
    expect(badZone.status).toBe(400);
    expect(badZone.body.errors).toEqual([expect.objectContaining({ path: '/timeZone' })]);
    const [after] = await sql`SELECT count(*)::int AS n FROM schedule`;
    expect(after?.n).toBe(before?.n);
  });
});

describe('firing', () => {
  it('starts one task per fire time on the injected clock, with the schedule key', async () => {
    h.clock.set(new Date('2031-01-01T00:30:00Z'));
    const s = await createSchedule(h);
    expect(s.nextFireAt).toBe('2031-01-01T01:00:00.000Z');
    h.clock.set(new Date('2031-01-01T01:00:01Z'));
    await expect.poll(async () => (await tasksOf(s.id)).length, patience).toBe(1);
    h.clock.set(new Date('2031-01-01T02:00:01Z'));
    await expect.poll(async () => (await tasksOf(s.id)).length, patience).toBe(2);
    const [first] = await tasksOf(s.id);
    const [key] = await sql`
      SELECT key FROM idempotency WHERE operation = 'task.create' AND response_body->'task'->>'id' = ${first!.id}`;
    expect(key?.key).toBe(`schedule:${s.id}:2031-01-01T01:00:00.000Z`);
    expect(await schedule(h, s.id)).toMatchObject({
      lastFireAt: '2031-01-01T02:00:00.000Z',
      nextFireAt: '2031-01-01T03:00:00.000Z',
      lastError: null,
    });
    await pause(s.id);
  });

  it("fills the input template's placeholders with each fire's time and the schedule's id", async () => {
    h.clock.set(new Date('2032-03-01T00:30:00Z'));
    const s = await createSchedule(h, {
      input: { sourceZip: '$.schedule.id', watermarkText: '$.schedule.fireTime' },
    });
    h.clock.set(new Date('2032-03-01T01:00:01Z'));
    await expect.poll(async () => (await tasksOf(s.id)).length, patience).toBe(1);
    const [task] = await tasksOf(s.id);
    const [row] = await sql`SELECT input FROM task WHERE id = ${task!.id}`;
    expect(row!.input).toEqual({ sourceZip: s.id, watermarkText: '2032-03-01T01:00:00.000Z' });
    // The schedule keeps its template.
    expect((await schedule(h, s.id)).input.watermarkText).toBe('$.schedule.fireTime');
    await pause(s.id);
  });

  it('two replicas on the same database start one task per fire time', async () => {
    const second = await startHarness({ runLoops: true, sharedDatabaseUrl: h.databaseUrl });
    try {
      const base = new Date('2032-01-01T00:00:30Z');
      h.clock.set(base);
      second.clock.set(base);
      // Every second, so both replicas' rounds meet the same due fires again and again.
      const s = await createSchedule(h, { cron: '* * * * * *' });
      for (let i = 1; i <= 5; i++) {
        const at = new Date(base.getTime() + i * 1000);
        h.clock.set(at);
        second.clock.set(at);
        await expect.poll(async () => (await tasksOf(s.id)).length, patience).toBe(i);
      }
      await pause(s.id);
      const tasks = await tasksOf(s.id);
      expect(tasks).toHaveLength(5);
      expect(new Set(tasks.map((t) => t.name)).size).toBe(5);
    } finally {
      await second.close();
    }
  });

  it('overlap SKIP drops a fire while the previous task runs; QUEUE_ONE starts it when that task ends', async () => {
    h.clock.set(new Date('2033-01-01T00:30:00Z'));
    const skip = await createSchedule(h, { overlap: 'SKIP' });
    const queue = await createSchedule(h, { overlap: 'QUEUE_ONE' });
    h.clock.set(new Date('2033-01-01T01:00:01Z'));
    await expect.poll(async () => (await tasksOf(skip.id)).length, patience).toBe(1);
    await expect.poll(async () => (await tasksOf(queue.id)).length, patience).toBe(1);
    // No worker takes them: both first tasks are still running at the next fire.
    h.clock.set(new Date('2033-01-01T02:00:01Z'));
    await expect
      .poll(async () => (await schedule(h, skip.id)).nextFireAt, patience)
      .toBe('2033-01-01T03:00:00.000Z');
    await expect
      .poll(async () => (await schedule(h, queue.id)).queuedFireAt, patience)
      .toBe('2033-01-01T02:00:00.000Z');
    expect(await tasksOf(skip.id)).toHaveLength(1);
    expect(await tasksOf(queue.id)).toHaveLength(1);
    for (const id of [skip.id, queue.id]) {
      const [task] = await tasksOf(id);
      const canceled = await h.request('POST', `/v1/tasks/${task!.id}:cancel`, {
        token: app.apiKey,
        body: {},
      });
      expect(canceled.status).toBe(200);
    }
    // The queued fire starts once its previous task has ended; SKIP starts nothing until its next fire.
    await expect.poll(async () => (await tasksOf(queue.id)).length, patience).toBe(2);
    // The task commits before the schedule's advance (its own transaction): wait for the advance.
    await expect.poll(async () => (await schedule(h, queue.id)).queuedFireAt, patience).toBeNull();
    expect(await tasksOf(skip.id)).toHaveLength(1);
    h.clock.set(new Date('2033-01-01T03:00:01Z'));
    await expect.poll(async () => (await tasksOf(skip.id)).length, patience).toBe(2);
    await pause(skip.id);
    await pause(queue.id);
  });
});

describe('downtime', () => {
  it('after the server was down, catches up once under QUEUE_ONE and ALLOW and skips under SKIP', async () => {
    // The server that creates the schedules runs no loops: nothing fires while only it is up.
    const down = await startHarness({ runLoops: false });
    const downSql = connectDatabase({ url: down.databaseUrl, maxConnections: 2 });
    try {
      const owner = await down.createApplication();
      const published = await down.request('POST', '/v1/workflow-definitions', {
        token: owner.apiKey,
        body: zipWorkflow(),
      });
      expect(published.status).toBe(201);
      down.clock.set(new Date('2034-01-01T00:30:00Z'));
      const created = {
        SKIP: await createSchedule(down, { overlap: 'SKIP' }, owner.apiKey),
        QUEUE_ONE: await createSchedule(down, { overlap: 'QUEUE_ONE' }, owner.apiKey),
        ALLOW: await createSchedule(down, { overlap: 'ALLOW' }, owner.apiKey),
      };
      // A server with loops comes up at 03:30: the fires of 01:00, 02:00 and 03:00 were missed.
      const up = await startHarness({ runLoops: true, sharedDatabaseUrl: down.databaseUrl });
      try {
        up.clock.set(new Date('2034-01-01T03:30:00Z'));
        for (const s of Object.values(created)) {
          await expect
            .poll(async () => (await schedule(up, s.id, owner.apiKey)).nextFireAt, patience)
            .toBe('2034-01-01T04:00:00.000Z');
        }
        const started = async (id: string) =>
          (
            await downSql`
              SELECT key FROM idempotency
              WHERE operation = 'task.create' AND key LIKE ${`schedule:${id}:%`} ORDER BY key`
          ).map((row) => row.key);
        expect(await started(created.SKIP.id)).toEqual([]);
        for (const s of [created.QUEUE_ONE, created.ALLOW]) {
          expect(await started(s.id)).toEqual([`schedule:${s.id}:2034-01-01T03:00:00.000Z`]);
        }
      } finally {
        await up.close();
      }
    } finally {
      await downSql.end();
      await down.close();
    }
  });
});
