/**
 * Concurrency keys under two server replicas on one database, each placing at task creation and in its
 * scheduler rounds: a customer's steps never run more at once than its key's limit (checked by SQL over
 * the whole run and by the worker's own count), the waiting ones say why on the task and its timeline,
 * a limit changed through the API takes effect without a redeploy, a key's limit is the one its latest
 * definition declares for every workflow naming it, and an operator's pause holds a key's steps (nothing
 * fails) until it is resumed.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../../../test/harness.ts';
import {
  type Replicas,
  sampleHighest,
  startCustomerWorker,
  startReplicas,
  succeededCount,
} from '../../../test/replicas.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let replicas: Replicas;
let first: Harness;
let second: Harness;
let sql: Replicas['sql'];

beforeAll(async () => {
  replicas = await startReplicas();
  ({ first, second, sql } = replicas);
});
afterAll(() => replicas.close());

const definition = (name: string, limit: number) => ({
  name,
  version: '1',
  inputSchema: {
    type: 'object',
    required: ['customerId'],
    properties: { customerId: { type: 'string' } },
  },
  concurrency: [{ key: 'customer', value: '$.input.customerId', limit }],
  steps: [
    {
      key: 'work',
      capability: 'keyed.work',
      capabilityVersion: '1',
      inputMapping: { customerId: '$.input.customerId' },
    },
  ],
});

/** `gate`: the worker holds each attempt until it opens (a step then surely waits behind them). */
async function setUp(workflow: string, limit: number, holdMs: number, gate?: Promise<void>) {
  const app = await first.createApplication();
  const published = await first.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: definition(workflow, limit),
  });
  expect(published.status, JSON.stringify(published.body)).toBe(201);
  const { worker, most } = await startCustomerWorker(first, {
    label: workflow,
    capability: 'keyed.work',
    holdMs,
    ...(gate ? { gate } : {}),
  });
  const create = (replica: Harness, customerId: string) =>
    replica.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: workflow, workflowVersion: '1', name: 'keyed', input: { customerId } },
    });
  return { app, worker, most, create };
}

const succeeded = (ids: string[]) => succeededCount(sql, ids);

describe('a concurrency key under two replicas', () => {
  it("never runs more of a customer's steps at once than its limit, and says why the others wait", async () => {
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const { app, worker, most, create } = await setUp('keyed', 2, 50, gate);
    // The database's count of customer 42's placed or running steps, sampled over the whole run.
    let mostPlaced = 0;
    const placed = sampleHighest(async () => {
      const [row] = await sql<{ placed: number }[]>`
        SELECT count(*)::int AS placed FROM step s JOIN task t ON t.id = s.task_id
        WHERE t.application_id = ${app.applicationId} AND t.input->>'customerId' = '42'
          AND s.current AND s.status IN ('QUEUED', 'RUNNING')`;
      return row!.placed;
    });
    try {
      const created: string[] = [];
      // Ten of customer 42's tasks and two of customer 7's, to both replicas in pairs.
      for (let i = 0; i < 5; i += 1) {
        for (const response of await Promise.all([create(first, '42'), create(second, '42')]))
          created.push(response.body.task.id);
      }
      for (const response of await Promise.all([create(first, '7'), create(second, '7')]))
        created.push(response.body.task.id);

      // A waiting step of customer 42 says which pool holds it, on the task and on its timeline.
      const waiting = created[9]!;
      await expect
        .poll(
          async () => {
            const task = await first.request('GET', `/v1/tasks/${waiting}`, { token: app.apiKey });
            return task.body.execution?.steps?.[0]?.unschedulableReasons ?? [];
          },
          { timeout: 10_000 },
        )
        .toContain('customer 42 at its limit 2/2');
      const timeline = await first.request('GET', `/v1/tasks/${waiting}/timeline`, { token: app.apiKey });
      expect(JSON.stringify(timeline.body)).toContain('customer 42 at its limit 2/2');
      // Customer 7 is not held behind customer 42's queue (its two run beside 42's two).
      await expect
        .poll(
          async () => {
            const [row] = await sql<{ n: number }[]>`
            SELECT count(*)::int AS n FROM step WHERE task_id = ANY(${created.slice(10)}::uuid[])
              AND current AND status IN ('QUEUED', 'RUNNING')`;
            return row!.n;
          },
          { timeout: 10_000 },
        )
        .toBe(2);
      open();

      await expect.poll(() => succeeded(created), { timeout: 60_000, interval: 100 }).toBe(created.length);
    } finally {
      mostPlaced = await placed.stop();
      await worker.stop();
    }
    expect(mostPlaced).toBe(2);
    expect(most.get('42')).toBe(2);
    // Every slot was given back.
    const [holds] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM concurrency_hold`;
    expect(holds!.n).toBe(0);
  }, 120_000);

  it("counts every workflow's steps against the limit the key's latest definition declares", async () => {
    const { app, worker, most, create } = await setUp('keyed-first', 3, 60);
    // Another workflow of the tenant declares the same key, later, with a lower limit: it is the key's.
    const later = await second.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: definition('keyed-later', 1),
    });
    expect(later.status, JSON.stringify(later.body)).toBe(201);
    try {
      const keys = await first.request('GET', '/v1/concurrency-keys', { token: app.apiKey });
      expect(keys.body.items).toContainEqual(
        expect.objectContaining({ name: 'customer', declaredLimit: 1, limit: null }),
      );
      const created: string[] = [];
      for (let i = 0; i < 2; i += 1)
        for (const response of await Promise.all([create(first, 's'), create(second, 's')]))
          created.push(response.body.task.id);
      await expect.poll(() => succeeded(created), { timeout: 60_000, interval: 100 }).toBe(created.length);
      // The first workflow's own snapshot says 3; its steps ran one at a time.
      expect(most.get('s')).toBe(1);
    } finally {
      await worker.stop();
    }
  }, 120_000);

  it('takes a limit set through the API at once, and refuses an unknown key and a limit below 1', async () => {
    const { app, worker, most, create } = await setUp('keyed-runtime', 5, 100);
    try {
      const lowered = await first.request('PUT', '/v1/concurrency-keys/customer', {
        token: app.apiKey,
        body: { limit: 1 },
      });
      expect(lowered.status, JSON.stringify(lowered.body)).toBe(200);
      expect(lowered.body).toMatchObject({ name: 'customer', limit: 1, declaredLimit: 5, paused: false });
      const created: string[] = [];
      for (let i = 0; i < 3; i += 1)
        for (const response of await Promise.all([create(first, 'a'), create(second, 'a')]))
          created.push(response.body.task.id);
      await expect
        .poll(async () => {
          const keys = await second.request('GET', '/v1/concurrency-keys', { token: app.apiKey });
          return keys.body.items.find((k: { name: string }) => k.name === 'customer')?.waiting;
        })
        .toBeGreaterThan(0);
      await expect.poll(() => succeeded(created), { timeout: 60_000, interval: 100 }).toBe(created.length);
      expect(most.get('a')).toBe(1);

      const unknown = await first.request('PUT', '/v1/concurrency-keys/nobody', {
        token: app.apiKey,
        body: { limit: 3 },
      });
      expect(unknown.status).toBe(404);
      expect(unknown.body.code).toBe('CONCURRENCY_KEY_UNKNOWN');
      const zero = await first.request('PUT', '/v1/concurrency-keys/customer', {
        token: app.apiKey,
        body: { limit: 0 },
      });
      expect(zero.status).toBe(400);
      const [row] = await sql<{ limit: number }[]>`
        SELECT "limit" FROM concurrency_key WHERE tenant_id = ${app.tenantId} AND name = 'customer'`;
      expect(row!.limit).toBe(1);
    } finally {
      await worker.stop();
    }
  }, 120_000);

  it("holds a paused key's steps without failing them until an operator resumes it (audited)", async () => {
    const { app, worker, create } = await setUp('keyed-paused', 3, 20);
    try {
      const pause = await first.request(
        'PUT',
        `/admin/v1/tenants/${app.tenantId}/concurrency-keys/customer`,
        {
          token: first.adminToken,
          body: { paused: true, reason: 'supplier outage' },
        },
      );
      expect(pause.status, JSON.stringify(pause.body)).toBe(200);
      expect(pause.body.paused).toBe(true);
      const created = [(await create(first, 'p')).body.task.id, (await create(second, 'p')).body.task.id];
      await expect
        .poll(
          async () => {
            const task = await first.request('GET', `/v1/tasks/${created[0]}`, { token: app.apiKey });
            return task.body.execution?.steps?.[0]?.unschedulableReasons ?? [];
          },
          { timeout: 10_000 },
        )
        .toContain('customer p paused');
      await sleep(600);
      expect(await succeeded(created)).toBe(0);
      const [failed] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM task WHERE id = ANY(${created}::uuid[]) AND lifecycle_status = 'FAILED'`;
      expect(failed!.n).toBe(0);

      const resume = await second.request(
        'PUT',
        `/admin/v1/tenants/${app.tenantId}/concurrency-keys/customer`,
        {
          token: second.adminToken,
          body: { paused: false, reason: 'supplier back' },
        },
      );
      expect(resume.status).toBe(200);
      await expect.poll(() => succeeded(created), { timeout: 30_000, interval: 100 }).toBe(2);
      const audit = await sql<{ action: string; reason: string }[]>`
        SELECT action, reason FROM operator_audit WHERE tenant_id = ${app.tenantId} ORDER BY created_at`;
      const keyChanges = audit.filter((a) => a.action === 'CONCURRENCY_KEY_CHANGED');
      expect(keyChanges.map((a) => a.reason)).toEqual(['supplier outage', 'supplier back']);
    } finally {
      await worker.stop();
    }
  }, 120_000);
});
