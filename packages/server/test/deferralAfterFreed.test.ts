/**
 * A scheduler round that found the worker full defers its requests; if capacity was freed while the
 * round ran, the freed-capacity wake-up's update came before the deferral and did not touch them. The
 * round then asks for the wake-up again once its deferral has committed, or the requests would wait out
 * the retry interval beside an idle worker. The round runs on the real database; what stands in for the
 * wake-up is a counter that the test moves during the round.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { attemptEvent, startTestWorker } from '../../../test/testWorker.ts';
import { dispatchReady } from '../src/core/workers/dispatch.ts';

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness({ settings: { commandPollIntervalMs: 20 } });
});
afterAll(() => harness.close());

/** The wake-up's face as a round sees it: a generation the test can move, and the calls of `freed`. */
function probeWakeup() {
  return {
    generation: 0,
    freedCalls: 0,
    freed() {
      this.freedCalls += 1;
    },
  };
}

describe('a round that deferred while capacity was freed', () => {
  it('asks for the freed-capacity retry again after its deferral; a round without a freeing does not', async () => {
    const app = await harness.createApplication();
    const workerKey = (
      await harness.request('POST', '/admin/v1/worker-credentials', {
        token: harness.adminToken,
        body: { label: 'deferral' },
      })
    ).body.key;
    const definition = {
      name: 'held',
      version: '1',
      inputSchema: { type: 'object' },
      steps: [{ key: 'only', capability: 'held.work', capabilityVersion: '1' }],
    };
    expect(
      (await harness.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: definition }))
        .status,
    ).toBe(201);
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const worker = await startTestWorker({
      baseUrl: harness.url,
      workerKey,
      nodeId: 'deferral-node',
      capabilities: [{ name: 'held.work', version: '1' }],
      maxConcurrency: 1,
      handler: async (command, report) => {
        await report([attemptEvent(command, 'STEP_STARTED', 1)]);
        await held;
        await report([attemptEvent(command, 'STEP_COMPLETED', 2, { output: {}, durationMs: 1 })]);
      },
    });
    const create = async () => {
      const response = await harness.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': newId() },
        body: { workflowName: 'held', workflowVersion: '1', name: 'held', input: {} },
      });
      expect(response.status, JSON.stringify(response.body)).toBe(201);
      return response.body.task.id as string;
    };
    const deps = harness.server.dispatch;
    const pendingReasons = async (taskId: string) => {
      const [row] = await harness.server.sql<{ reasons: string[] }[]>`
        SELECT reasons FROM scheduling_request WHERE task_id = ${taskId} AND status = 'PENDING'`;
      return row?.reasons ?? null;
    };
    try {
      // The first task fills the worker (placed at create time, or by this round).
      await create();
      await dispatchReady(deps, 10);
      await expect.poll(() => worker.received.length, { timeout: 10_000 }).toBe(1);

      // A round with no freeing during it: the second task is deferred, and nothing more is asked.
      const quiet = probeWakeup();
      const second = await create();
      await dispatchReady({ ...deps, capacity: quiet }, 10);
      expect(await pendingReasons(second)).toEqual([
        `${worker.workerId}: worker is at its concurrency limit`,
      ]);
      expect(quiet.freedCalls).toBe(0);

      // Capacity freed while the round runs (here: as it reads the workers, before its deferral).
      const freedDuring = probeWakeup();
      const store = deps.workers;
      const workers = Object.assign(Object.create(store), {
        candidates: async () => {
          freedDuring.generation += 1;
          return store.candidates();
        },
      });
      const third = await create();
      await harness.server.sql`UPDATE scheduling_request SET available_at = ${harness.clock.now()}
        WHERE task_id = ANY(${[second, third]}::uuid[])`;
      await dispatchReady({ ...deps, workers, capacity: freedDuring }, 10);
      expect(await pendingReasons(third)).toEqual([`${worker.workerId}: worker is at its concurrency limit`]);
      expect(freedDuring.freedCalls).toBe(1);
    } finally {
      release();
      await worker.stop();
    }
  }, 30_000);
});
