/**
 * Worker concurrency against a real server: the runtime's default is a fixed number suited to I/O-bound
 * steps, a capability declares its own lower limit, and the server places no more attempts of that
 * capability on the worker than its limit (the others wait for a worker, with the reason), while other
 * capabilities keep the rest of the worker's slots. A worker that registers wakes the steps waiting for one.
 */
import { mkdtempSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinCapabilities } from '@tdp/capabilities';
import { newId } from '@tdp/protocol';
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { defineCapability, LocalStore, WorkerClient, WorkerRuntime } from '../src/index.ts';
import { WorkerConfigError, withCapabilityLimits } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
const directory = mkdtempSync(join(tmpdir(), 'tdp-concurrency-test-'));
const runtimes: { runtime: WorkerRuntime; client: WorkerClient; store: LocalStore }[] = [];

/** Attempts wait here, by task id, until the test lets them finish. */
const gates = new Map<string, () => void>();
const release = (taskId: string) => {
  const open = gates.get(taskId);
  if (!open) throw new Error(`task ${taskId} is not running`);
  open();
};

const gated = (name: string, maxConcurrency?: number) =>
  defineCapability({
    name,
    version: '1',
    input: Type.Object({}),
    output: Type.Object({}),
    ...(maxConcurrency ? { maxConcurrency } : {}),
    run: (ctx) =>
      new Promise((resolve, reject) => {
        gates.set(ctx.taskId, () => resolve({}));
        ctx.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      }),
  });

const startRuntime = async (
  nodeId: string,
  capabilities: ReturnType<typeof gated>[],
  maxConcurrency?: number,
) => {
  const client = new WorkerClient(h.url, workerKey, 5_000);
  const store = new LocalStore(join(directory, `${nodeId}.db`), newId);
  const runtime = new WorkerRuntime({
    client,
    store,
    capabilities,
    nodeId,
    progressIntervalMs: 0,
    ...(maxConcurrency ? { maxConcurrency } : {}),
  });
  runtimes.push({ runtime, client, store });
  await runtime.start();
  return runtime;
};

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
  for (const capability of ['test.cpu', 'test.io', 'test.late'])
    await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: {
        name: capability,
        version: '1',
        steps: [{ key: 'only', capability, capabilityVersion: '1', retry: { maxAttempts: 1 } }],
      },
    });
});
afterAll(async () => {
  for (const { runtime, client, store } of runtimes) {
    await runtime.stop();
    await client.close();
    store.close();
  }
  await h.close();
});

const submit = async (workflowName: string) =>
  (
    await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName, workflowVersion: '1', name: workflowName, input: {} },
    })
  ).body.task.id as string;

const view = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body as {
    task: { lifecycleStatus: string };
    execution: { steps: { status: string; unschedulableReasons?: string[] }[] };
  };
const stepOf = async (taskId: string) => (await view(taskId)).execution.steps[0]!;

const workerView = async (workerId: string) =>
  (
    (await h.request('GET', '/v1/workers', { token: app.apiKey })).body as {
      id: string;
      maxConcurrency: number;
      capabilities: { name: string; version: string; maxConcurrency?: number }[];
    }[]
  ).find((w) => w.id === workerId)!;

describe('worker concurrency', () => {
  it("the worker's limit defaults to a fixed number for I/O-bound steps; a capability registers its own", async () => {
    const runtime = await startRuntime('node-default', [gated('test.cpu', 1), gated('test.io')]);
    const registered = await workerView(runtime.id!);
    // Not the number of CPUs (2 on a small machine): steps mostly wait on I/O.
    expect(registered.maxConcurrency).toBe(10);
    expect(registered.capabilities).toEqual([
      { name: 'test.cpu', version: '1', maxConcurrency: 1 },
      { name: 'test.io', version: '1' },
    ]);
    await runtime.drain();
  });

  it("a capability's own limit is respected by placement; the other capability keeps the worker's slots", async () => {
    // Room for all five attempts but for the capability's own limit.
    await startRuntime('node-limits', [gated('test.cpu', 1), gated('test.io')], 8);

    const cpu = [await submit('test.cpu'), await submit('test.cpu')];
    const io = [await submit('test.io'), await submit('test.io'), await submit('test.io')];
    for (const taskId of io)
      await expect.poll(async () => (await stepOf(taskId)).status, { timeout: 10_000 }).toBe('RUNNING');
    // One test.cpu attempt runs; the other is not placed on the worker at all, and says why.
    const waitingOne = async () => {
      const steps = await Promise.all(cpu.map(stepOf));
      const running = steps.filter((s) => s.status === 'RUNNING').length;
      const waiting = steps.filter(
        (s) =>
          s.status === 'READY' &&
          (s.unschedulableReasons ?? []).some((r) => r.includes('concurrency limit for test.cpu')),
      ).length;
      return `${running} running, ${waiting} waiting`;
    };
    await expect.poll(waitingOne, { timeout: 10_000 }).toBe('1 running, 1 waiting');
    const first = (await stepOf(cpu[0]!)).status === 'RUNNING' ? cpu[0]! : cpu[1]!;
    const second = first === cpu[0] ? cpu[1]! : cpu[0]!;

    // Its slot freed, the waiting one is placed at once (the harness clock stands still, so the put-back
    // request's own retry time never comes).
    release(first);
    await expect.poll(async () => (await stepOf(second)).status, { timeout: 10_000 }).toBe('RUNNING');
    for (const taskId of [second, ...io]) release(taskId);
    for (const taskId of [...cpu, ...io])
      await expect
        .poll(async () => (await view(taskId)).task.lifecycleStatus, { timeout: 10_000 })
        .toBe('SUCCEEDED');
  });

  it('a step waiting because no worker offers its capability starts as soon as one registers', async () => {
    const taskId = await submit('test.late');
    await expect
      .poll(async () => (await stepOf(taskId)).unschedulableReasons ?? [], { timeout: 10_000 })
      .toContain('no worker offers test.late@1');
    await startRuntime('node-late', [gated('test.late')]);
    await expect.poll(async () => (await stepOf(taskId)).status, { timeout: 10_000 }).toBe('RUNNING');
    release(taskId);
    await expect
      .poll(async () => (await view(taskId)).task.lifecycleStatus, { timeout: 10_000 })
      .toBe('SUCCEEDED');
  });
});

describe('tdp worker concurrency settings', () => {
  it('TDP_WORKER_CAPABILITY_CONCURRENCY sets limits by name; the built-in (CPU-bound) ones default to the CPUs', () => {
    const io = gated('test.io');
    const limited = withCapabilityLimits([io, ...builtinCapabilities], 'archive.clean=3');
    const limitOf = (name: string) => limited.find((c) => c.name === name)?.maxConcurrency;
    expect(limitOf('test.io')).toBeUndefined();
    expect(limitOf('archive.clean')).toBe(3);
    expect(limitOf('image.watermark')).toBe(availableParallelism());
    expect(withCapabilityLimits([gated('test.cpu', 2)], undefined)[0]!.maxConcurrency).toBe(2);
    for (const wrong of ['test.io', 'test.io=0', 'other=2', 'test.io=1.5'])
      expect(() => withCapabilityLimits([io], wrong)).toThrow(WorkerConfigError);
  });

  it('a capability declaring a limit outside 1–1000 is refused when defined', () => {
    expect(() => gated('test.bad', 1001)).toThrow('maxConcurrency');
  });
});
