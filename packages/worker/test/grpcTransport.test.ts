/**
 * The runtime with `GrpcReporting`: a real task runs to SUCCEEDED with its output, every event and
 * attempt heartbeat over the gRPC stream (the REST events route is never used), at the port the server
 * announced at registration; a stream cut while the step runs is survived (a new stream, the attempt
 * bound again, the events resent) with every event applied once.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { GrpcReporting, grpcAddressOf } from '../src/grpcReporting.ts';
import { defineCapability, LocalStore, WorkerClient, WorkerRuntime } from '../src/index.ts';
import { startWorkerFromEnv, WorkerConfigError } from '../src/main.ts';
import { silentLogger } from '../src/options.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
const directory = mkdtempSync(join(tmpdir(), 'tdp-grpc-worker-'));

beforeAll(async () => {
  // One binding per stream: each bind forgets the one before (heartbeats and events of an attempt take
  // turns), so the transport must bind again and resend whenever the server has forgotten its key.
  h = await startHarness({ runLoops: true, settings: { grpcStreamMaxBindings: 1 } });
  app = await h.createApplication();
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'grpc-echo',
      version: '1',
      steps: [
        {
          key: 'only',
          capability: 'test.grpc-echo',
          capabilityVersion: '1',
          inputMapping: { text: '$.input.text' },
          timeouts: { heartbeatMs: 3_000 },
        },
      ],
    },
  });
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'grpc-main',
      version: '1',
      steps: [{ key: 'only', capability: 'test.grpc-main', capabilityVersion: '1' }],
    },
  });
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'grpc-cut',
      version: '1',
      steps: [
        {
          key: 'only',
          capability: 'test.grpc-cut',
          capabilityVersion: '1',
        },
      ],
    },
  });
});
afterAll(async () => {
  await h.close();
});

/** The REST client, with its events route out of use: whatever reaches it is counted and refused. */
class RestWithoutEvents extends WorkerClient {
  restEvents = 0;
  override async sendEvents(): Promise<never> {
    this.restEvents += 1;
    throw new Error('events must go over gRPC');
  }
  override async attemptHeartbeats(): Promise<never> {
    this.restEvents += 1;
    throw new Error('heartbeats must go over gRPC');
  }
}

describe('worker runtime over gRPC', () => {
  it('runs a real task to SUCCEEDED, reporting events and heartbeats on the stream', async () => {
    const client = new RestWithoutEvents(h.url, workerKey, 5_000);
    let runtime!: WorkerRuntime;
    const reporting = new GrpcReporting(() => `127.0.0.1:${runtime.grpcPort}`, workerKey);
    runtime = new WorkerRuntime({
      client,
      reporting,
      store: new LocalStore(join(directory, 'grpc.db'), newId),
      capabilities: [
        defineCapability({
          name: 'test.grpc-echo',
          version: '1',
          input: Type.Object({ text: Type.String() }),
          output: Type.Object({ echo: Type.String() }),
          // Long enough for attempt heartbeats (the step's heartbeat timeout is 3 s, one beat a second).
          run: async (context, input) => {
            context.progress(50);
            await new Promise((resolve) => setTimeout(resolve, 2_500));
            return { echo: input.text };
          },
        }),
      ],
      nodeId: 'node-grpc',
    });
    await runtime.start();
    try {
      expect(runtime.grpcPort).toBe(h.server.grpcPort);
      const created = await h.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': newId() },
        body: { workflowName: 'grpc-echo', workflowVersion: '1', name: 'grpc', input: { text: 'over grpc' } },
      });
      const taskId = created.body.task.id as string;
      const task = async () => (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
      await expect
        .poll(async () => (await task()).task.lifecycleStatus, { timeout: 20_000 })
        .toBe('SUCCEEDED');
      const [step] = (await task()).execution.steps;
      expect(step.data).toEqual({ echo: 'over grpc' });
      // Attempt heartbeats renewed the lease, by key on the stream.
      expect(step.lastHeartbeatAt).not.toBeNull();
      const events = (await h.request('GET', `/v1/tasks/${taskId}/events?limit=100`, { token: app.apiKey }))
        .body.items as { eventType: string }[];
      expect(events.map((e) => e.eventType)).toEqual(
        expect.arrayContaining(['STEP_STARTED', 'STEP_PROGRESS', 'STEP_COMPLETED']),
      );
      expect(client.restEvents).toBe(0);
    } finally {
      await runtime.stop();
      reporting.close();
      await client.close();
    }
  });

  it('survives a stream cut while the step runs: a new stream, a new bind, the events resent and applied once', async () => {
    const proxy = new TcpProxy('127.0.0.1', h.server.grpcPort!);
    const port = await proxy.start();
    const client = new RestWithoutEvents(h.url, workerKey, 5_000);
    const warnings: string[] = [];
    const reporting = new GrpcReporting(`127.0.0.1:${port}`, workerKey);
    const runtime = new WorkerRuntime({
      client,
      reporting,
      store: new LocalStore(join(directory, 'cut.db'), newId),
      logger: { info: () => {}, warn: (_fields, message) => warnings.push(message), error: () => {} },
      capabilities: [
        defineCapability({
          name: 'test.grpc-cut',
          version: '1',
          input: Type.Object({}),
          output: Type.Object({ done: Type.Boolean() }),
          run: async (context) => {
            // STEP_STARTED has gone out on the first stream; the connection is then cut under it.
            await new Promise((resolve) => setTimeout(resolve, 300));
            await proxy.cut();
            context.progress(50);
            await new Promise((resolve) => setTimeout(resolve, 1_200));
            await proxy.restore();
            return { done: true };
          },
        }),
      ],
      nodeId: 'node-grpc-cut',
    });
    await runtime.start();
    try {
      const created = await h.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': newId() },
        body: { workflowName: 'grpc-cut', workflowVersion: '1', name: 'cut', input: {} },
      });
      const taskId = created.body.task.id as string;
      const task = async () => (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
      await expect
        .poll(async () => (await task()).task.lifecycleStatus, { timeout: 30_000 })
        .toBe('SUCCEEDED');
      expect(warnings).toContain('events not delivered; retrying');
      const events = (await h.request('GET', `/v1/tasks/${taskId}/events?limit=100`, { token: app.apiKey }))
        .body.items as { eventId: string; eventType: string }[];
      const reported = events.filter(
        (e) => e.eventType.startsWith('STEP_') && e.eventType !== 'STEP_DISPATCHED',
      );
      expect(new Set(reported.map((e) => e.eventId)).size).toBe(reported.length);
      expect(reported.filter((e) => e.eventType === 'STEP_COMPLETED')).toHaveLength(1);
      expect(client.restEvents).toBe(0);
    } finally {
      await runtime.stop();
      reporting.close();
      await client.close();
      await proxy.cut();
    }
  });

  it('tdp worker with TDP_WORKER_TRANSPORT=grpc reports at the port the server announced', async () => {
    const env = {
      TDP_URL: h.url,
      TDP_WORKER_KEY: workerKey,
      TDP_WORKER_DB: join(directory, 'main.db'),
      TDP_NODE_ID: 'node-grpc-main',
    };
    // The environment form runs a capability module's attempts in runner processes.
    const capabilities = new URL('./fixtures/capabilities.ts', import.meta.url);
    await expect(
      startWorkerFromEnv({ ...env, TDP_WORKER_TRANSPORT: 'carrier-pigeon' }, capabilities),
    ).rejects.toThrow(WorkerConfigError);
    const worker = await startWorkerFromEnv(
      { ...env, TDP_WORKER_TRANSPORT: 'grpc' },
      capabilities,
      silentLogger,
    );
    try {
      const created = await h.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': newId() },
        body: { workflowName: 'grpc-main', workflowVersion: '1', name: 'main', input: {} },
      });
      const taskId = created.body.task.id as string;
      const task = async () => (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
      await expect
        .poll(async () => (await task()).task.lifecycleStatus, { timeout: 20_000 })
        .toBe('SUCCEEDED');
      expect((await task()).execution.steps[0].data).toEqual({ via: 'grpc' });
      // Registration went over REST; no event or attempt heartbeat did (in this whole file).
      const metrics = (await fetch(`${h.url}/metrics`).then((r) => r.text())).split('\n');
      expect(metrics.some((line) => line.includes('/v1/workers/register'))).toBe(true);
      expect(metrics.filter((line) => /events::batch|task-heartbeats/.test(line))).toEqual([]);
    } finally {
      await worker.drain();
    }
  });

  it('the gRPC address: the announced port on the host of the server URL', () => {
    expect(grpcAddressOf('http://127.0.0.1:8080', 7443)).toBe('127.0.0.1:7443');
    expect(grpcAddressOf('https://tdp.example:443/prefix', 7443)).toBe('tdp.example:7443');
    expect(grpcAddressOf('http://[::1]:8080', 7443)).toBe('[::1]:7443');
    expect(grpcAddressOf('http://127.0.0.1:8080', null)).toBeNull();
  });
});
