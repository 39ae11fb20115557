/**
 * Singleton keys with `whenRunning: 'wait'` (core/tasks/taskKeys.ts, placement.ts, taskKeyTables.ts):
 * a create while the key is held makes a task that waits, parked with its reason, and starts as soon as
 * the holder finishes (the holder's commit hands the key on; the leases loop's recheck is kept out of
 * the way, so only that fast path can start it); concurrent creates run one at a time (checked by SQL
 * over the whole run); the recheck catches a parked step the hand-over skipped; and the concurrency
 * keys' recheck leaves steps parked on a singleton alone.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { attemptEvent, type StartCommand, startTestWorker } from '../../../test/testWorker.ts';
import { unparkWithRoom } from '../src/adapters/outbound/postgres/concurrencyTables.ts';
import { unparkSingletons } from '../src/adapters/outbound/postgres/taskKeyTables.ts';
import { connectDatabase } from '../src/main.ts';

// No recheck by the leases loop during a test: a waiting task starts by its holder's commit alone.
const settings = { commandPollIntervalMs: 20, retryUnplaceableMs: 200, leaseCheckIntervalMs: 600_000 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let sql: ReturnType<typeof connectDatabase>;
let ticking: NodeJS.Timeout;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
/** Started attempts, in order; each is held until `finish(taskId)`. */
const started: string[] = [];
const gates = new Map<string, () => void>();
/** Tasks told to finish, maybe before their attempt reached its gate. */
const finished = new Set<string>();
const finish = (taskId: string) => {
  finished.add(taskId);
  gates.get(taskId)?.();
};
let holdAll = true;

beforeAll(async () => {
  h = await startHarness({ runLoops: true, settings });
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 3 });
  ticking = setInterval(() => h.clock.advance(20), 20);
  app = await h.createApplication();
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'sync',
      version: '1',
      steps: [{ key: 'run', capability: 'sync.run', capabilityVersion: '1' }],
    },
  });
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-singleton',
    capabilities: [{ name: 'sync.run', version: '1' }],
    maxConcurrency: 8,
    handler: async (command: StartCommand, report) => {
      started.push(command.taskId);
      await report([attemptEvent(command, 'STEP_STARTED', 1)]);
      if (holdAll && !finished.has(command.taskId))
        await new Promise<void>((resolve) => gates.set(command.taskId, resolve));
      else await sleep(60);
      await report([attemptEvent(command, 'STEP_COMPLETED', 2, { output: {}, durationMs: 1 })]);
    },
  });
});
afterAll(async () => {
  clearInterval(ticking);
  for (const open of gates.values()) open();
  await worker.stop();
  await sql.end();
  await h.close();
});

const submit = (key: string, whenRunning: 'wait' | 'refuse' = 'wait') =>
  h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName: 'sync', workflowVersion: '1', name: 'sync', singleton: { key, whenRunning } },
  });
const read = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
const status = async (taskId: string) => (await read(taskId)).task.lifecycleStatus;
const parkedOf = (taskId: string) =>
  sql<{ parked_key: string | null; parked_value: string | null }[]>`
    SELECT parked_key, parked_value FROM scheduling_request WHERE task_id = ${taskId} AND status = 'PENDING'`;
const holderOf = async (key: string) =>
  (await sql`SELECT task_id FROM task_key_slot WHERE kind = 'singleton' AND key = ${key}`)[0]?.task_id;

describe('singleton whenRunning: wait', () => {
  it('creates a waiting task that says why, and starts it as soon as the holder finishes', async () => {
    const first = await submit('nightly-sync');
    expect(first.status).toBe(201);
    const a = first.body.task.id;
    expect(first.body.singleton).toEqual({ outcome: 'holder' });
    await expect.poll(() => started.includes(a), { timeout: 10_000 }).toBe(true);

    const second = await submit('nightly-sync');
    expect(second.status).toBe(201);
    const b = second.body.task.id;
    expect(second.body.singleton).toEqual({ outcome: 'waiting', heldBy: a });
    // The refuse policy still refuses while either of them is unfinished.
    const refused = await submit('nightly-sync', 'refuse');
    expect([refused.status, refused.body.code]).toEqual([409, 'SINGLETON_RUNNING']);

    const reason = `singleton nightly-sync: held by task ${a} until it finishes`;
    await expect
      .poll(async () => (await read(b)).execution.steps[0].unschedulableReasons, { timeout: 10_000 })
      .toEqual([reason]);
    expect(await parkedOf(b)).toEqual([{ parked_key: 'tdp:singleton', parked_value: 'nightly-sync' }]);
    const timeline = (await h.request('GET', `/v1/tasks/${b}/timeline`, { token: app.apiKey })).body.items;
    expect(timeline.filter((m: any) => m.kind === 'WAITING_FOR_WORKER').map((m: any) => m.message)).toEqual([
      `step run is waiting for a worker: ${reason}`,
    ]);

    // Parked rounds later, still not started; the concurrency keys' recheck leaves it parked.
    await sleep(600);
    expect(await unparkWithRoom(sql, h.clock.now())).toBe(0);
    expect(await parkedOf(b)).toHaveLength(1);
    expect(started).not.toContain(b);

    finish(a);
    await expect.poll(() => status(a), { timeout: 10_000 }).toBe('SUCCEEDED');
    // The holder's commit handed the key on and let B in (the leases loop's recheck does not run here).
    await expect.poll(() => started.includes(b), { timeout: 5_000 }).toBe(true);
    expect(await holderOf('nightly-sync')).toBe(b);
    finish(b);
    await expect.poll(() => status(b), { timeout: 10_000 }).toBe('SUCCEEDED');

    // The key is free: the next create holds it.
    const third = await submit('nightly-sync');
    expect(third.body.singleton).toEqual({ outcome: 'holder' });
    await expect.poll(() => started.includes(third.body.task.id), { timeout: 10_000 }).toBe(true);
    finish(third.body.task.id);
  });

  it('the recheck lets in a parked step the hand-over skipped (a round held its row)', async () => {
    const a = (await submit('hourly')).body.task.id;
    await expect.poll(() => started.includes(a), { timeout: 10_000 }).toBe(true);
    const b = (await submit('hourly')).body.task.id;
    await expect
      .poll(async () => (await parkedOf(b))[0]?.parked_key, { timeout: 10_000 })
      .toBe('tdp:singleton');
    // Hold B's request row as a scheduler round would while A finishes: the hand-over skips it.
    await sql.begin(async (tx) => {
      await tx`SELECT id FROM scheduling_request WHERE task_id = ${b} AND status = 'PENDING' FOR UPDATE`;
      finish(a);
      await expect.poll(() => status(a), { timeout: 10_000 }).toBe('SUCCEEDED');
    });
    expect(await holderOf('hourly')).toBe(b);
    await sleep(500);
    expect(started).not.toContain(b);
    expect(await parkedOf(b)).toHaveLength(1);
    // The recheck (the leases loop's, called here): B holds the key, so its own step is let in.
    expect(await unparkSingletons(sql, h.clock.now())).toBe(1);
    await expect.poll(() => started.includes(b), { timeout: 10_000 }).toBe(true);
    finish(b);
    await expect.poll(() => status(b), { timeout: 10_000 }).toBe('SUCCEEDED');
  });

  it('concurrent creates: all created, exactly one holder, and one task of the key runs at a time', async () => {
    holdAll = false;
    const answers = await Promise.all(Array.from({ length: 5 }, () => submit('burst')));
    expect(answers.map((x) => x.status)).toEqual(Array(5).fill(201));
    const outcomes = answers.map((x) => x.body.singleton.outcome).sort();
    expect(outcomes).toEqual(['holder', 'waiting', 'waiting', 'waiting', 'waiting']);
    const ids = answers.map((x) => x.body.task.id);
    // The database's count of the key's tasks with a step placed or running, sampled over the run.
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [row] = await sql<{ tasks: number }[]>`
          SELECT count(DISTINCT s.task_id)::int AS tasks FROM step s
          WHERE s.task_id = ANY(${ids}::uuid[]) AND s.current AND s.status IN ('QUEUED', 'RUNNING')`;
        most = Math.max(most, row!.tasks);
        await sleep(5);
      }
    })();
    try {
      await expect
        .poll(
          async () =>
            (
              await sql`SELECT count(*)::int AS n FROM task
                        WHERE id = ANY(${ids}::uuid[]) AND lifecycle_status = 'SUCCEEDED'`
            )[0]!.n,
          { timeout: 20_000 },
        )
        .toBe(5);
    } finally {
      sampling = false;
      await sampler;
    }
    expect(most).toBe(1);
    expect(started.filter((id) => ids.includes(id))).toHaveLength(5);
    // The holder answered first ran first.
    const holder = answers.find((x) => x.body.singleton.outcome === 'holder')!.body.task.id;
    expect(started.find((id) => ids.includes(id))).toBe(holder);
  });
});
