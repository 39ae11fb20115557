/**
 * Hard capacity: two server replicas on one database, each placing at task creation and in its
 * scheduler rounds, and one worker with maxConcurrency 1. The worker never holds two open attempts.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { attemptEvent, startTestWorker } from '../../../test/testWorker.ts';
import { connectDatabase } from '../src/main.ts';

// A round that found the worker busy defers its requests by `retryUnplaceableMs`, kept short here. The
// replicas' test clocks tick with real time while the tasks run (a clock that stood still would leave a
// request it deferred never due for its own scheduler, and for the other's only if that clock was ahead).
const settings = { commandPollIntervalMs: 20, retryUnplaceableMs: 200 };
const tasks = 24;
const holdMs = 60;

let first: Harness;
let second: Harness;
let sql: ReturnType<typeof connectDatabase>;

beforeAll(async () => {
  first = await startHarness({ runLoops: true, settings });
  second = await startHarness({ runLoops: true, settings, sharedDatabaseUrl: first.databaseUrl });
  sql = connectDatabase({ url: first.databaseUrl, maxConnections: 2 });
});
afterAll(async () => {
  await sql.end();
  await second.close();
  await first.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a worker with capacity 1 under two replicas', () => {
  it('never has more than one attempt open, placed at create time or by either scheduler', async () => {
    const app = await first.createApplication();
    const workerKey = (
      await first.request('POST', '/admin/v1/worker-credentials', {
        token: first.adminToken,
        body: { label: 'capacity' },
      })
    ).body.key;
    const definition = {
      name: 'one-step',
      version: '1',
      inputSchema: { type: 'object' },
      steps: [{ key: 'only', capability: 'slow.work', capabilityVersion: '1' }],
    };
    expect(
      (await first.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: definition }))
        .status,
    ).toBe(201);

    // The worker's own count of attempts it runs at once: it stops counting one before it reports its
    // end, so a next attempt the server placed after that end is never counted twice.
    let running = 0;
    let mostRunning = 0;
    const worker = await startTestWorker({
      baseUrl: first.url,
      workerKey,
      nodeId: 'capacity-node',
      capabilities: [{ name: 'slow.work', version: '1' }],
      maxConcurrency: 1,
      handler: async (command, report) => {
        running += 1;
        mostRunning = Math.max(mostRunning, running);
        await report([attemptEvent(command, 'STEP_STARTED', 1)]);
        await sleep(holdMs);
        running -= 1;
        await report([attemptEvent(command, 'STEP_COMPLETED', 2, { output: {}, durationMs: holdMs })]);
      },
    });

    // The database's count of the worker's open attempts, sampled while the tasks run.
    let mostOpen = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [row] = await sql<{ open: number }[]>`
          SELECT count(*)::int AS open FROM attempt WHERE worker_id = ${worker.workerId} AND revoked_at IS NULL`;
        mostOpen = Math.max(mostOpen, row!.open);
        await sleep(5);
      }
    })();

    const tick = 20;
    const ticking = setInterval(() => {
      first.clock.advance(tick);
      second.clock.advance(tick);
    }, tick);
    try {
      // Creates go to both replicas in pairs, so each places from its own view of the worker.
      const created: string[] = [];
      for (let i = 0; i < tasks; i += 2) {
        const pair = await Promise.all(
          [first, second].map((replica) =>
            replica.request('POST', '/v1/tasks', {
              token: app.apiKey,
              headers: { 'idempotency-key': newId() },
              body: { workflowName: 'one-step', workflowVersion: '1', name: 'capacity', input: {} },
            }),
          ),
        );
        for (const response of pair) {
          expect(response.status, JSON.stringify(response.body)).toBe(201);
          created.push(response.body.task.id);
        }
        await sleep(holdMs / 3);
      }

      await expect
        .poll(
          async () => {
            const [row] = await sql<{ done: number }[]>`
              SELECT count(*)::int AS done FROM task WHERE id = ANY(${created}::uuid[]) AND lifecycle_status = 'SUCCEEDED'`;
            return row!.done;
          },
          { timeout: 60_000, interval: 100 },
        )
        .toBe(tasks);
    } finally {
      clearInterval(ticking);
      sampling = false;
      await sampler;
      await worker.stop();
    }

    expect(worker.received).toHaveLength(tasks);
    expect(mostOpen).toBe(1);
    expect(mostRunning).toBe(1);
  }, 90_000);
});
