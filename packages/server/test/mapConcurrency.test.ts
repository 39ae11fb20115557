/**
 * A map step's concurrency keys and rate limits, under two server replicas on one database: each item's
 * attempt holds its own slot of the map's pools (shared, by key name, with a plain step of another
 * workflow placed by the other replica) and takes its own token, so a map over a customer's files never
 * runs more of them at once than the key allows (checked by SQL over the whole run and by the worker's
 * own count) nor starts them faster than the bucket; the map says why its items wait, once on its
 * timeline; and every slot is given back as the items end.
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

const inputSchema = {
  type: 'object',
  required: ['customerId', 'files'],
  properties: { customerId: { type: 'string' }, files: { type: 'array' } },
};

/** A map over `$.input.files`, each item one `keyed.file` attempt, under `limits`. */
const mapWorkflow = (name: string, limits: Record<string, unknown>) => ({
  name,
  version: '1',
  inputSchema,
  steps: [
    {
      key: 'each',
      kind: 'map',
      map: {
        items: '$.input.files',
        capability: 'keyed.file',
        capabilityVersion: '1',
        inputMapping: { customerId: '$.input.customerId', file: '$.item' },
        maxParallel: 10,
      },
      ...limits,
    },
  ],
});

/** `gate`: the worker holds each attempt until it opens (an item then surely waits behind them). */
async function setUp(label: string, holdMs: number, gate?: Promise<void>) {
  const app = await first.createApplication();
  const { worker, most } = await startCustomerWorker(first, {
    label,
    capability: 'keyed.file',
    holdMs,
    ...(gate ? { gate } : {}),
  });
  const publish = async (replica: Harness, body: unknown) => {
    const published = await replica.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
  };
  const create = async (replica: Harness, workflowName: string, input: Record<string, unknown>) => {
    const created = await replica.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName, workflowVersion: '1', name: workflowName, input },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return created.body.task.id as string;
  };
  const reasonsOf = async (taskId: string): Promise<string[]> => {
    const task = await first.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey });
    return task.body.execution?.steps?.[0]?.unschedulableReasons ?? [];
  };
  return { app, worker, most, publish, create, reasonsOf };
}

const succeeded = (ids: string[]) => succeededCount(sql, ids);

describe('a map step under concurrency keys and rate limits', () => {
  it("holds a slot per item, shared with other workflows' steps of the key, and says why once", async () => {
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const { app, worker, most, publish, create, reasonsOf } = await setUp('map-keyed', 30, gate);
    const customer = { key: 'customer', value: '$.input.customerId', limit: 2 };
    await publish(first, mapWorkflow('map-keyed', { concurrency: [customer] }));
    await publish(second, {
      name: 'one-keyed',
      version: '1',
      inputSchema,
      concurrency: [customer],
      steps: [
        {
          key: 'work',
          capability: 'keyed.file',
          capabilityVersion: '1',
          inputMapping: { customerId: '$.input.customerId' },
        },
      ],
    });
    // Customer 42's attempts placed or running, by the database, sampled over the whole run: the map's
    // items and the plain steps of the other workflow.
    let mostPlaced = 0;
    const placed = sampleHighest(async () => {
      const [row] = await sql<{ placed: number }[]>`
        SELECT (SELECT count(*) FROM map_item i JOIN step s ON s.id = i.step_id JOIN task t ON t.id = s.task_id
                WHERE t.application_id = ${app.applicationId} AND t.input->>'customerId' = '42'
                  AND i.status = 'RUNNING')::int
             + (SELECT count(*) FROM step s JOIN task t ON t.id = s.task_id
                WHERE t.application_id = ${app.applicationId} AND t.input->>'customerId' = '42'
                  AND t.workflow_name = 'one-keyed' AND s.current AND s.status IN ('QUEUED', 'RUNNING'))::int
               AS placed`;
      return row!.placed;
    });
    const files = Array.from({ length: 8 }, (_, i) => `f${i}.png`);
    let mapTask = '';
    const created: string[] = [];
    try {
      mapTask = await create(first, 'map-keyed', { customerId: '42', files });
      created.push(mapTask);
      created.push(await create(second, 'one-keyed', { customerId: '42', files: [] }));
      created.push(await create(second, 'one-keyed', { customerId: '42', files: [] }));
      // Another customer's map is not held behind customer 42's pool.
      created.push(await create(second, 'map-keyed', { customerId: '7', files: ['a', 'b'] }));
      await expect
        .poll(() => reasonsOf(mapTask), { timeout: 10_000 })
        .toContain('customer 42 at its limit 2/2');
      await expect
        .poll(
          async () => {
            const [row] = await sql<{ n: number }[]>`
              SELECT count(*)::int AS n FROM concurrency_hold WHERE task_id = ${created[3]!}`;
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
    // The map's wait is on its timeline once, though its items waited at each of their ends.
    const timeline = await first.request('GET', `/v1/tasks/${mapTask}/timeline`, { token: app.apiKey });
    const said = timeline.body.items.filter(
      (m: { kind: string; message: string }) =>
        m.kind === 'WAITING_FOR_WORKER' && m.message.includes('customer 42 at its limit 2/2'),
    );
    expect(said, JSON.stringify(timeline.body)).toHaveLength(1);
    const [holds] = await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM concurrency_hold WHERE task_id = ANY(${created}::uuid[])`;
    expect(holds!.n).toBe(0);
  }, 120_000);

  it('takes a token per item, so a map starts its items no faster than the bucket', async () => {
    const limit = 2;
    const intervalMs = 1000;
    const { worker, publish, create, reasonsOf } = await setUp('map-rated', 10);
    await publish(
      first,
      mapWorkflow('map-rated', {
        rateLimits: [{ key: 'thumbnails', value: '$.input.customerId', limit, intervalMs }],
      }),
    );
    const seen = new Set<string>();
    let created = '';
    try {
      created = await create(second, 'map-rated', { customerId: 'r', files: ['1', '2', '3', '4', '5', '6'] });
      while ((await succeeded([created])) < 1) {
        for (const reason of await reasonsOf(created)) seen.add(reason);
        await sleep(50);
      }
    } finally {
      await worker.stop();
    }
    expect(
      [...seen].some((r) => /^thumbnails r rate 2 per 1s: next start at /.test(r)),
      [...seen].join('\n'),
    ).toBe(true);
    // A bucket of `limit` refilled `limit` per interval lets no more than limit + elapsed × rate start.
    const starts = (
      await sql<
        { at: Date }[]
      >`SELECT created_at AS at FROM attempt WHERE task_id = ${created} ORDER BY created_at`
    ).map((r) => r.at.getTime());
    expect(starts).toHaveLength(6);
    for (let i = 0; i < starts.length; i += 1)
      for (let j = i; j < starts.length; j += 1) {
        const allowed = Math.floor(limit + ((starts[j]! - starts[i]! + 40) * limit) / intervalMs);
        expect(j - i + 1, `starts ${i}..${j}: ${starts.join(', ')}`).toBeLessThanOrEqual(allowed);
      }
  }, 120_000);

  it("gives a cancelled map's slots back at once, letting the step parked on its pool in", async () => {
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const { app, worker, publish, create } = await setUp('map-cancelled', 10, gate);
    const customer = { key: 'customer', value: '$.input.customerId', limit: 2 };
    await publish(first, mapWorkflow('map-cancel', { concurrency: [customer] }));
    await publish(first, {
      name: 'one-after',
      version: '1',
      inputSchema,
      concurrency: [customer],
      steps: [{ key: 'work', capability: 'keyed.file', capabilityVersion: '1' }],
    });
    const holdsOf = async (taskId: string) => {
      const [row] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM concurrency_hold WHERE task_id = ${taskId}`;
      return row!.n;
    };
    try {
      const mapTask = await create(first, 'map-cancel', { customerId: 'c', files: ['1', '2', '3', '4'] });
      await expect.poll(() => holdsOf(mapTask), { timeout: 10_000 }).toBe(2);
      const waiting = await create(second, 'one-after', { customerId: 'c', files: [] });
      await expect
        .poll(async () => {
          const [row] = await sql<{ parked_key: string | null }[]>`
            SELECT parked_key FROM scheduling_request WHERE task_id = ${waiting}`;
          return row?.parked_key;
        })
        .toBe('customer');
      const cancelled = await first.request('POST', `/v1/tasks/${mapTask}:cancel`, {
        token: app.apiKey,
        headers: { 'idempotency-key': newId() },
        body: {},
      });
      expect(cancelled.status, JSON.stringify(cancelled.body)).toBeLessThan(300);
      // Its items' slots are free while their attempts are still stopping, and the parked step holds one.
      expect(await holdsOf(mapTask)).toBe(0);
      await expect.poll(() => holdsOf(waiting), { timeout: 10_000 }).toBe(1);
      open();
      await expect.poll(() => succeeded([waiting]), { timeout: 30_000, interval: 100 }).toBe(1);
    } finally {
      open();
      await worker.stop();
    }
  }, 120_000);
});
