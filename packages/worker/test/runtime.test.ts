/**
 * The worker runtime against a real TDP server: capabilities run end to end; a result recorded locally
 * but not delivered survives SIGKILL and goes out after the restart under the same event id, once; the
 * sender outlasts the server being unreachable; SIGTERM hands back what is still running and exits 0.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import { connectDatabase } from '@tdp/server';
import Database from 'better-sqlite3';
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { backoffMs, defineCapability, LocalStore, WorkerClient, WorkerRuntime } from '../src/index.ts';
import {
  killAllWorkerProcesses,
  startWorkerProcess,
  stopWorkerProcess,
  submitTask,
  taskView,
} from './support.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
const directory = mkdtempSync(join(tmpdir(), 'tdp-worker-test-'));

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
  for (const [name, capability, mapping] of [
    ['echo-wf', 'test.echo', { text: '$.input.text', delayMs: '$.input.delayMs' }],
    ['wait-wf', 'test.wait', {}],
    ['resume-wf', 'test.resume', {}],
    ['local-wf', 'test.local', {}],
    ['along-wf', 'test.along', {}],
  ] as const) {
    if (name === 'wait-wf') {
      // The same capability with a 3 s heartbeat timeout: the worker must beat for it.
      await h.request('POST', '/v1/workflow-definitions', {
        token: app.apiKey,
        body: {
          name: 'beat-wf',
          version: '1',
          steps: [
            {
              key: 'only',
              capability,
              capabilityVersion: '1',
              timeouts: { heartbeatMs: 3_000 },
              retry: { maxAttempts: 1 },
            },
          ],
        },
      });
    }
    await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: {
        name,
        version: '1',
        steps: [
          {
            key: 'only',
            capability,
            capabilityVersion: '1',
            inputMapping: mapping,
            retry: { maxAttempts: 2, initialBackoffMs: 100, maxBackoffMs: 100, multiplier: 1 },
          },
        ],
      },
    });
  }
});
afterAll(async () => {
  killAllWorkerProcesses();
  await h.close();
});

const startWorker = (baseUrl: string, dbPath: string, nodeId: string) =>
  startWorkerProcess(baseUrl, workerKey, dbPath, nodeId);
const stopWorker = stopWorkerProcess;

const submit = (workflowName: string, input: Record<string, unknown>) =>
  submitTask(h, app.apiKey, workflowName, input);

const task = (taskId: string) => taskView(h, app.apiKey, taskId);

const events = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}/events?limit=500`, { token: app.apiKey })).body.items as {
    eventId: string;
    eventType: string;
  }[];

/** An in-process runtime offering one capability that does nothing. */
const noopRuntime = (client: WorkerClient, store: LocalStore, capability: string, nodeId: string) =>
  new WorkerRuntime({
    client,
    store,
    capabilities: [
      defineCapability({
        name: capability,
        version: '1',
        input: Type.Object({}),
        output: Type.Object({}),
        run: async () => ({}),
      }),
    ],
    nodeId,
  });

describe('worker runtime', () => {
  it('runs a capability: started, progress, completed with its output; bad input and refusals fail the step', async () => {
    const worker = await startWorker(h.url, join(directory, 'happy.db'), 'node-happy');
    try {
      const ok = await submit('echo-wf', { text: 'hello', delayMs: 0 });
      const refused = await submit('echo-wf', { text: 'refuse', delayMs: 0 });
      const invalid = await submit('echo-wf', { text: 42, delayMs: 0 });
      await expect
        .poll(async () => (await task(ok)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      const done = await task(ok);
      expect(done.execution.steps[0].data).toEqual({ echo: 'hello' });
      const types = (await events(ok)).map((e) => e.eventType);
      expect(types).toEqual(expect.arrayContaining(['STEP_STARTED', 'STEP_PROGRESS', 'STEP_COMPLETED']));

      await expect
        .poll(async () => (await task(refused)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('FAILED');
      expect((await task(refused)).task.failure).toMatchObject({ code: 'TEXT_REFUSED' });
      await expect
        .poll(async () => (await task(invalid)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('FAILED');
      expect((await task(invalid)).task.failure).toMatchObject({ code: 'INPUT_INVALID' });
    } finally {
      await stopWorker(worker);
    }
  });

  it('a result recorded but not delivered survives SIGKILL: after the restart it goes out under the same event id, once', async () => {
    const port = Number(new URL(h.url).port);
    const proxy = new TcpProxy('127.0.0.1', port);
    await proxy.start();
    const dbPath = join(directory, 'kill.db');
    const worker = await startWorker(`http://127.0.0.1:${proxy.port}`, dbPath, 'node-kill');
    try {
      const taskId = await submit('echo-wf', { text: 'survive', delayMs: 1_500 });
      await expect
        .poll(async () => (await task(taskId)).execution.steps[0]?.status, { timeout: 15_000 })
        .toBe('RUNNING');
      // The server becomes unreachable while the step finishes: the result can only be kept locally.
      await proxy.cut();
      const local = new Database(dbPath, { readonly: true });
      const unsentCompletion = () =>
        local
          .prepare("SELECT event_id FROM outbox WHERE sent_at IS NULL AND body LIKE '%STEP_COMPLETED%'")
          .get() as { event_id: string } | undefined;
      await expect.poll(unsentCompletion, { timeout: 10_000 }).toBeTruthy();
      const eventId = unsentCompletion()!.event_id;
      local.close();
      worker.child.kill('SIGKILL');
      await worker.exited;
      expect((await task(taskId)).task.lifecycleStatus).not.toBe('SUCCEEDED');

      await proxy.restore();
      const restarted = await startWorker(`http://127.0.0.1:${proxy.port}`, dbPath, 'node-kill');
      // The restart takes back the same session (it was not gone long enough to be ended).
      expect(restarted.workerId).toBe(worker.workerId);
      await expect
        .poll(async () => (await task(taskId)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      const completions = (await events(taskId)).filter((e) => e.eventType === 'STEP_COMPLETED');
      expect(completions.map((e) => e.eventId)).toEqual([eventId]);
      await stopWorker(restarted);
    } finally {
      await proxy.cut();
    }
  });

  it('the sender outlasts the server being unreachable for 10 seconds', async () => {
    const port = Number(new URL(h.url).port);
    const proxy = new TcpProxy('127.0.0.1', port);
    await proxy.start();
    const worker = await startWorker(
      `http://127.0.0.1:${proxy.port}`,
      join(directory, 'outage.db'),
      'node-outage',
    );
    try {
      const taskId = await submit('echo-wf', { text: 'later', delayMs: 1_000 });
      await expect
        .poll(async () => (await task(taskId)).execution.steps[0]?.status, { timeout: 15_000 })
        .toBe('RUNNING');
      await proxy.cut();
      await new Promise((resolve) => setTimeout(resolve, 10_000));
      expect((await task(taskId)).task.lifecycleStatus).not.toBe('SUCCEEDED');
      await proxy.restore();
      // The sender's back-off is at most 30 s (about 8 s after a 10 s outage).
      await expect
        .poll(async () => (await task(taskId)).task.lifecycleStatus, { timeout: 40_000 })
        .toBe('SUCCEEDED');
      await stopWorker(worker);
    } finally {
      worker.child.kill('SIGKILL');
      await proxy.cut();
    }
  }, 70_000);

  it('SIGTERM hands back a running attempt (a retryable failure, so it runs again) and exits 0', async () => {
    const worker = await startWorker(h.url, join(directory, 'drain.db'), 'node-drain');
    const taskId = await submit('wait-wf', {});
    await expect
      .poll(async () => (await task(taskId)).execution.steps[0]?.status, { timeout: 15_000 })
      .toBe('RUNNING');
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    const failures = (await events(taskId)).filter((e) => e.eventType === 'STEP_FAILED');
    expect(failures).toHaveLength(1);
    // Handed back as retryable: the step waits for its next attempt instead of failing the task.
    await expect
      .poll(async () => (await task(taskId)).execution.steps[0]?.attempt, { timeout: 10_000 })
      .toBe(2);
    expect((await task(taskId)).task.lifecycleStatus).not.toBe('FAILED');
  });

  it('after SIGKILL mid-attempt, a resumable capability picks up from its checkpoint; another is handed back and runs again', async () => {
    const dbPath = join(directory, 'restart.db');
    const worker = await startWorker(h.url, dbPath, 'node-restart');
    const resumable = await submit('resume-wf', {});
    const plain = await submit('wait-wf', {});
    for (const taskId of [resumable, plain])
      await expect
        .poll(async () => (await task(taskId)).execution.steps[0]?.status, { timeout: 15_000 })
        .toBe('RUNNING');
    const local = new Database(dbPath, { readonly: true });
    await expect
      .poll(
        () =>
          local.prepare('SELECT count(*) AS n FROM attempt WHERE checkpoint IS NOT NULL').get() as {
            n: number;
          },
      )
      .toEqual({ n: 1 });
    local.close();
    worker.child.kill('SIGKILL');
    await worker.exited;

    const restarted = await startWorker(h.url, dbPath, 'node-restart');
    try {
      expect(restarted.workerId).toBe(worker.workerId);
      await expect
        .poll(async () => (await task(resumable)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      expect((await task(resumable)).execution.steps[0].data).toEqual({ resumedFrom: 7 });
      // The other was handed back as WORKER_RESTARTED and placed again (attempt 2).
      await expect
        .poll(async () => (await task(plain)).execution.steps[0]?.attempt, { timeout: 15_000 })
        .toBe(2);
      const failures = (await events(plain)).filter((e) => e.eventType === 'STEP_FAILED');
      expect(failures).toHaveLength(1);
    } finally {
      await stopWorker(restarted);
    }
  });

  it("acknowledges START_ATTEMPT with the attempt's events, in the same request", async () => {
    const carried: string[] = [];
    const acked: string[] = [];
    class CountingClient extends WorkerClient {
      override async ack(workerId: string, commandIds: string[]) {
        acked.push(...commandIds);
        return super.ack(workerId, commandIds);
      }
      override async sendEvents(
        workerId: string,
        events: Record<string, unknown>[],
        commandAcks: string[] = [],
      ) {
        carried.push(...commandAcks);
        return super.sendEvents(workerId, events, commandAcks);
      }
    }
    const runtime = noopRuntime(
      new CountingClient(h.url, workerKey, 2_000),
      new LocalStore(join(directory, 'along.db'), newId),
      'test.along',
      'node-along',
    );
    await runtime.start();
    const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
    try {
      for (let i = 0; i < 3; i += 1) {
        const taskId = await submit('along-wf', {});
        await expect
          .poll(async () => (await task(taskId)).task.lifecycleStatus, { timeout: 15_000 })
          .toBe('SUCCEEDED');
      }
      const starts = await sql<{ id: string; acked_at: Date | null }[]>`
        SELECT c.id, c.acked_at FROM worker_command c JOIN worker w ON w.id = c.worker_id
        WHERE w.node_id = 'node-along' AND c.type = 'START_ATTEMPT'`;
      expect(starts).toHaveLength(3);
      // Each acknowledged on the server, by the events' request rather than one of its own (the ack
      // loop only takes what is left at its once-a-second round, so at most a rare one goes that way).
      for (const start of starts) {
        expect(start.acked_at).not.toBeNull();
        expect(carried.includes(start.id) || acked.includes(start.id)).toBe(true);
      }
      expect(starts.filter((c) => carried.includes(c.id)).length).toBeGreaterThanOrEqual(2);
    } finally {
      await sql.end();
      await runtime.stop();
    }
  });

  it('a local database error stops the worker with that error instead of being taken for "offline"', async () => {
    const store = new LocalStore(join(directory, 'broken.db'), newId);
    const runtime = noopRuntime(
      new WorkerClient(h.url, workerKey, 2_000),
      store,
      'test.local',
      'node-broken',
    );
    await runtime.start();
    // The disk goes away under the worker: its next local write fails.
    store.close();
    await submit('local-wf', {});
    await expect(runtime.done).rejects.toThrow(/database/i);
  });

  it('backs off from 1 s to 30 s with jitter', () => {
    expect(backoffMs(1, () => 0)).toBe(500);
    expect(backoffMs(1, () => 1)).toBe(1_000);
    expect(backoffMs(3, () => 1)).toBe(4_000);
    expect(backoffMs(20, () => 1)).toBe(30_000);
    expect(backoffMs(20, () => 0)).toBe(15_000);
  });

  it('beats for a running attempt as often as its heartbeat timeout needs (a third of it), in batches', async () => {
    const worker = await startWorker(h.url, join(directory, 'beat.db'), 'node-beat');
    const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
    try {
      const taskId = await submit('beat-wf', {});
      await expect
        .poll(async () => (await task(taskId)).execution.steps[0]?.status, { timeout: 15_000 })
        .toBe('RUNNING');
      // Heartbeats renew the attempt's lease row (execution_lease), not the step row.
      const seq = async () =>
        Number(
          (await sql`SELECT heartbeat_seq FROM execution_lease WHERE task_id = ${taskId}`)[0]
            ?.heartbeat_seq ?? 0,
        );
      await expect.poll(seq, { timeout: 5_000 }).toBeGreaterThan(0);
      const first = await seq();
      await expect.poll(seq, { timeout: 5_000 }).toBeGreaterThan(first);
    } finally {
      await sql.end();
      await stopWorker(worker);
    }
  });
});
