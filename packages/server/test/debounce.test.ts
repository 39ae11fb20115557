/**
 * Debounce and singleton keys of `POST /v1/tasks` (core/tasks/taskKeys.ts): last wins, first wins,
 * concurrent creates with one key, Idempotency-Key replays, the singleton's refusal, and bad input.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { advanceBeating } from '../../../test/killableWorker.ts';
import { completeWith, startTestWorker } from '../../../test/testWorker.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
let sql: ReturnType<typeof connectDatabase>;

const windowMs = 60_000;

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
  for (const [name, capability] of [
    ['debounced-wf', 'debounced.op'],
    ['idle-wf', 'idle.op'],
  ] as const) {
    await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: { name, version: '1', steps: [{ key: 'only', capability, capabilityVersion: '1' }] },
    });
  }
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
});
afterAll(async () => {
  await sql.end();
  await h.close();
});

const submit = (
  keys: Record<string, unknown>,
  options: { key?: string; workflowName?: string; apiKey?: string; externalRef?: string } = {},
) =>
  h.request('POST', '/v1/tasks', {
    token: options.apiKey ?? app.apiKey,
    headers: { 'idempotency-key': options.key ?? newId() },
    body: {
      workflowName: options.workflowName ?? 'idle-wf',
      workflowVersion: '1',
      name: 'debounced',
      ...(options.externalRef ? { externalRef: options.externalRef } : {}),
      ...keys,
    },
  });
const debounce = (key: string, keep: 'last' | 'first') => ({ debounce: { key, windowMs, keep } });
const read = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
const taskCount = async () => Number((await sql`SELECT count(*)::int AS n FROM task`)[0]!.n);

describe('debounce', () => {
  it('last wins: the waiting task is cancelled for the new one, which runs once its own window ends', async () => {
    const starts: string[] = [];
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-debounce',
      capabilities: [{ name: 'debounced.op', version: '1' }],
      handler: async (command, report) => {
        starts.push(command.taskId);
        await completeWith({ ran: true })(command, report);
      },
    });
    try {
      const first = await submit(debounce('sync-42', 'last'), { workflowName: 'debounced-wf' });
      expect(first.status).toBe(201);
      const a = first.body.task.id;
      expect(first.body.debounce).toEqual({ outcome: 'created', taskId: a });

      await advanceBeating(h.clock, 30_000, [worker]);
      const second = await submit(debounce('sync-42', 'last'), { workflowName: 'debounced-wf' });
      expect(second.status).toBe(201);
      const b = second.body.task.id;
      expect(second.body.debounce).toEqual({ outcome: 'replaced', taskId: b, replacedTaskId: a });
      expect((await read(a)).task.lifecycleStatus).toBe('CANCELLED');
      const timeline = (await h.request('GET', `/v1/tasks/${a}/timeline`, { token: app.apiKey })).body.items;
      expect(timeline.find((m: any) => m.kind === 'CANCELLED').message).toContain(`replaced by task ${b}`);

      // A's window would have ended here; B's restarted with B and has not.
      await advanceBeating(h.clock, 45_000, [worker]);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(starts).toEqual([]);
      await advanceBeating(h.clock, 20_000, [worker]);
      await expect
        .poll(async () => (await read(b)).task.lifecycleStatus, { timeout: 10_000 })
        .toBe('SUCCEEDED');
      expect(starts).toEqual([b]);

      // The window is over: the key is free, the next create is a new debounced task.
      const third = await submit(debounce('sync-42', 'last'));
      expect(third.body.debounce).toEqual({ outcome: 'created', taskId: third.body.task.id });
    } finally {
      h.clock.set(new Date());
      await worker.stop();
    }
  });

  it('first wins: a create within the window makes nothing and answers with the waiting task', async () => {
    const first = await submit(debounce('report-7', 'first'));
    const a = first.body.task.id;
    expect(first.body.debounce).toEqual({ outcome: 'created', taskId: a });
    const externalRef = newId();
    const second = await submit(debounce('report-7', 'first'), { externalRef });
    expect(second.status).toBe(200);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    expect(second.body.task.id).toBe(a);
    expect(second.body.debounce).toEqual({ outcome: 'dropped', taskId: a });
    expect((await read(a)).task.lifecycleStatus).toBe('PENDING');
    const made = await h.request('GET', `/v1/tasks?externalRef=${externalRef}`, { token: app.apiKey });
    expect(made.body.items).toEqual([]);
  });

  it('keys belong to the application: another application’s create with the same key is its own', async () => {
    const other = await h.createApplicationIn(app.tenantId, 'other');
    await h.request('POST', '/v1/workflow-definitions', {
      token: other.apiKey,
      body: {
        name: 'idle-wf',
        version: '1',
        steps: [{ key: 'only', capability: 'idle.op', capabilityVersion: '1' }],
      },
    });
    const mine = await submit(debounce('shared-key', 'last'));
    const theirs = await submit(debounce('shared-key', 'last'), { apiKey: other.apiKey });
    expect(theirs.body.debounce.outcome).toBe('created');
    expect((await read(mine.body.task.id)).task.lifecycleStatus).toBe('PENDING');
  });

  it.each(['last', 'first'] as const)(
    'concurrent creates with one key (keep %s) leave exactly one waiting task',
    async (keep) => {
      const key = `burst-${keep}`;
      const answers = await Promise.all(Array.from({ length: 8 }, () => submit(debounce(key, keep))));
      const outcomes = answers.map((a) => a.body.debounce.outcome).sort();
      const survivors = await sql<{ id: string }[]>`
        SELECT t.id FROM task t JOIN task_key_slot s ON s.application_id = t.application_id
        WHERE s.kind = 'debounce' AND s.key = ${key} AND t.id = ANY(${answers.map((a) => a.body.task.id)}::uuid[])
          AND t.lifecycle_status = 'PENDING'`;
      expect(survivors).toHaveLength(1);
      const [slot] = await sql`SELECT task_id FROM task_key_slot WHERE kind = 'debounce' AND key = ${key}`;
      expect(slot!.task_id).toBe(survivors[0]!.id);
      if (keep === 'last') {
        expect(outcomes).toEqual(['created', ...Array(7).fill('replaced')]);
        const cancelled = await Promise.all(
          answers.filter((a) => a.body.task.id !== survivors[0]!.id).map((a) => read(a.body.task.id)),
        );
        expect(cancelled.map((t) => t.task.lifecycleStatus)).toEqual(Array(7).fill('CANCELLED'));
      } else {
        expect(outcomes).toEqual([...Array(7).fill('dropped'), 'created'].sort());
        expect(new Set(answers.map((a) => a.body.task.id))).toEqual(new Set([survivors[0]!.id]));
      }
    },
  );

  it('a replay gives the first answer and changes nothing, for each outcome', async () => {
    const [k1, k2, k3] = [newId(), newId(), newId()];
    const created = await submit(debounce('replay-1', 'last'), { key: k1 });
    const replaced = await submit(debounce('replay-1', 'last'), { key: k2 });
    const dropped = await submit(debounce('replay-1', 'first'), { key: k3 });
    expect(dropped.body.debounce).toEqual({ outcome: 'dropped', taskId: replaced.body.task.id });
    const before = await taskCount();
    for (const [key, keep, answer] of [
      [k1, 'last', created],
      [k2, 'last', replaced],
      [k3, 'first', dropped],
    ] as const) {
      const again = await submit(debounce('replay-1', keep), { key });
      expect(again.status).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.body.debounce).toEqual(answer.body.debounce);
      expect(again.body.task.id).toBe(answer.body.task.id);
    }
    expect(await taskCount()).toBe(before);
    // The replay of the first create did not replace the task waiting now.
    expect((await read(replaced.body.task.id)).task.lifecycleStatus).toBe('PENDING');
    // The same key with another debounce is another request.
    const reused = await submit(debounce('replay-2', 'last'), { key: k1 });
    expect([reused.status, reused.body.code]).toEqual([409, 'IDEMPOTENCY_KEY_REUSED']);
  });
});

describe('singleton', () => {
  const singleton = (key: string) => ({ singleton: { key, whenRunning: 'refuse' } });

  it('refuses a create while a task of the key is not finished, and takes it once that one is', async () => {
    const first = await submit(singleton('nightly'));
    expect(first.status).toBe(201);
    const a = first.body.task.id;
    const before = await taskCount();
    const key = newId();
    const refused = await submit(singleton('nightly'), { key });
    expect([refused.status, refused.body.code]).toEqual([409, 'SINGLETON_RUNNING']);
    expect(refused.body.detail).toContain(a);
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expect(await taskCount()).toBe(before);

    // Another key is free.
    expect((await submit(singleton('hourly'))).status).toBe(201);

    const cancelled = await h.request('POST', `/v1/tasks/${a}:cancel`, { token: app.apiKey, body: {} });
    expect(cancelled.status).toBe(200);
    expect((await read(a)).task.lifecycleStatus).toBe('CANCELLED');
    // The refusal was not kept: the same Idempotency-Key now creates the task.
    const taken = await submit(singleton('nightly'), { key });
    expect(taken.status).toBe(201);
    expect(taken.body.task.id).not.toBe(a);
    const [slot] = await sql`SELECT task_id FROM task_key_slot WHERE kind = 'singleton' AND key = 'nightly'`;
    expect(slot!.task_id).toBe(taken.body.task.id);
  });

  it('concurrent creates with one singleton key make exactly one task', async () => {
    const answers = await Promise.all(Array.from({ length: 6 }, () => submit(singleton('once'))));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
  });
});

describe('bad input', () => {
  it.each([
    ['a window of 0', { debounce: { key: 'k', windowMs: 0, keep: 'last' } }],
    ['a window over a day', { debounce: { key: 'k', windowMs: 86_400_001, keep: 'last' } }],
    ['an unknown keep', { debounce: { key: 'k', windowMs: 1000, keep: 'middle' } }],
    ['an empty key', { debounce: { key: '', windowMs: 1000, keep: 'last' } }],
    ['a key too long', { debounce: { key: 'k'.repeat(201), windowMs: 1000, keep: 'last' } }],
    ['no window', { debounce: { key: 'k', keep: 'last' } }],
    ['an unknown debounce field', { debounce: { key: 'k', windowMs: 1000, keep: 'last', extra: 1 } }],
    ['a singleton without key', { singleton: { whenRunning: 'refuse' } }],
    ['a singleton policy not offered', { singleton: { key: 'k', whenRunning: 'queue' } }],
  ])('%s is a 400 that changes nothing', async (_, keys) => {
    const before = await taskCount();
    const answer = await submit(keys);
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe('VALIDATION_FAILED');
    expect(await taskCount()).toBe(before);
  });
});
