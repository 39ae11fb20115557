/**
 * Rate limits under two server replicas on one database, each placing at task creation and in its
 * scheduler rounds: a key's starts never outrun its token bucket (checked by SQL over every attempt of
 * the run), a waiting step names the time of the next token, an operator's pause holds the key's steps
 * (nothing fails) until resumed, and publish refuses bad declarations.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../../../test/harness.ts';
import { type Replicas, startCustomerWorker, startReplicas, succeededCount } from '../../../test/replicas.ts';

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

const definition = (name: string, rateLimits: unknown[], inputSchema?: unknown) => ({
  name,
  version: '1',
  inputSchema: inputSchema ?? {
    type: 'object',
    required: ['customerId'],
    properties: { customerId: { type: 'string' } },
  },
  rateLimits,
  steps: [
    {
      key: 'work',
      capability: 'rated.work',
      capabilityVersion: '1',
      inputMapping: { customerId: '$.input.customerId' },
    },
  ],
});

async function setUp(workflow: string, key: string, limit: number, intervalMs: number) {
  const app = await first.createApplication();
  const published = await first.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: definition(workflow, [{ key, limit, intervalMs }]),
  });
  expect(published.status, JSON.stringify(published.body)).toBe(201);
  const { worker } = await startCustomerWorker(first, {
    label: workflow,
    capability: 'rated.work',
    holdMs: 1,
  });
  const create = (replica: Harness, customerId: string) =>
    replica.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: workflow, workflowVersion: '1', name: 'rated', input: { customerId } },
    });
  return { app, worker, create };
}

const succeeded = (ids: string[]) => succeededCount(sql, ids);

const reasonsOf = async (app: { apiKey: string }, taskId: string): Promise<string[]> => {
  const task = await first.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey });
  return task.body.execution?.steps?.[0]?.unschedulableReasons ?? [];
};

describe('a rate limit under two replicas', () => {
  it('never starts faster than its bucket allows, and a waiting step names the next token', async () => {
    const limit = 3;
    const intervalMs = 1000;
    const { app, worker, create } = await setUp('rated', 'openai', limit, intervalMs);
    const seen = new Set<string>();
    try {
      const created: string[] = [];
      for (let i = 0; i < 5; i += 1)
        for (const response of await Promise.all([create(first, 'x'), create(second, 'x')]))
          created.push(response.body.task.id);
      // Some waiting step says which bucket holds it and when its next token comes.
      const watching = (async () => {
        while ((await succeeded(created)) < created.length) {
          for (const id of created) for (const reason of await reasonsOf(app, id)) seen.add(reason);
          await sleep(50);
        }
      })();
      await expect.poll(() => succeeded(created), { timeout: 60_000, interval: 100 }).toBe(created.length);
      await watching;
    } finally {
      await worker.stop();
    }
    expect(
      [...seen].some((r) => /^openai rate 3 per 1s: next start at \d\d:\d\d:\d\d(\.\d{3})?Z$/.test(r)),
      [...seen].join('\n'),
    ).toBe(true);
    // Every attempt's start (its placement, by the replicas' one clock), in order. A token bucket of
    // `limit` refilled `limit` per interval lets no more than limit + elapsed × rate start in any span.
    const starts = (
      await sql<{ at: Date }[]>`
        SELECT a.created_at AS at FROM attempt a JOIN task t ON t.id = a.task_id
        WHERE t.application_id = ${app.applicationId} ORDER BY a.created_at`
    ).map((r) => r.at.getTime());
    expect(starts).toHaveLength(10);
    for (let i = 0; i < starts.length; i += 1)
      for (let j = i; j < starts.length; j += 1) {
        const allowed = Math.floor(limit + ((starts[j]! - starts[i]! + 40) * limit) / intervalMs);
        expect(j - i + 1, `starts ${i}..${j}: ${starts.join(', ')}`).toBeLessThanOrEqual(allowed);
      }
  }, 120_000);

  it("holds a paused key's steps without failing them until an operator resumes it", async () => {
    const { app, worker, create } = await setUp('rated-paused', 'mailer', 5, 1000);
    try {
      // The key is known to the run-time API, as a rate limit.
      const keys = await second.request('GET', '/v1/concurrency-keys', { token: app.apiKey });
      expect(keys.body.items).toContainEqual(
        expect.objectContaining({ name: 'mailer', declaredLimit: 5, intervalMs: 1000, paused: false }),
      );
      const pause = await first.request('PUT', `/admin/v1/tenants/${app.tenantId}/concurrency-keys/mailer`, {
        token: first.adminToken,
        body: { paused: true, reason: 'supplier outage' },
      });
      expect(pause.status, JSON.stringify(pause.body)).toBe(200);
      const created = [(await create(first, 'p')).body.task.id, (await create(second, 'p')).body.task.id];
      await expect.poll(() => reasonsOf(app, created[0]!), { timeout: 10_000 }).toContain('mailer paused');
      await sleep(600);
      expect(await succeeded(created)).toBe(0);
      const [failed] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM task WHERE id = ANY(${created}::uuid[]) AND lifecycle_status = 'FAILED'`;
      expect(failed!.n).toBe(0);

      const resume = await second.request(
        'PUT',
        `/admin/v1/tenants/${app.tenantId}/concurrency-keys/mailer`,
        {
          token: second.adminToken,
          body: { paused: false, reason: 'supplier back' },
        },
      );
      expect(resume.status).toBe(200);
      await expect.poll(() => succeeded(created), { timeout: 30_000, interval: 100 }).toBe(2);
    } finally {
      await worker.stop();
    }
  }, 120_000);

  it('refuses bad declarations at publish, nothing published', async () => {
    const app = await first.createApplication();
    const publish = (name: string, rateLimits: unknown[]) =>
      first.request('POST', '/v1/workflow-definitions', {
        token: app.apiKey,
        body: definition(name, rateLimits),
      });
    for (const [name, rateLimits] of [
      ['zero', [{ key: 'k', limit: 0, intervalMs: 1000 }]],
      ['too-short', [{ key: 'k', limit: 1, intervalMs: 50 }]],
      ['too-long', [{ key: 'k', limit: 1, intervalMs: 86_400_001 }]],
    ] as const) {
      const response = await publish(name, [...rateLimits]);
      expect(response.status, name).toBe(400);
    }
    const missing = await publish('missing', [
      { key: 'k', value: '$.input.region', limit: 1, intervalMs: 1000 },
    ]);
    expect(missing.status).toBe(422);
    expect(missing.body.code).toBe('WORKFLOW_DEFINITION_INVALID');
    expect(missing.body.detail).toContain('does not guarantee $.input.region');
    const twoRates = await publish('two-rates', [
      { key: 'k', limit: 1, intervalMs: 1000 },
      { key: 'k', limit: 2, intervalMs: 1000 },
    ]);
    expect(twoRates.status).toBe(422);
    expect(twoRates.body.code).toBe('WORKFLOW_DEFINITION_INVALID');
    const [row] = await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM workflow_definition d JOIN application a ON a.tenant_id = d.tenant_id
      WHERE a.id = ${app.applicationId}`;
    expect(row!.n).toBe(0);
  }, 60_000);
});
