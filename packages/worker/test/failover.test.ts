/**
 * Worker failover between two real `tdp server` replicas on one database: a worker process given both
 * URLs runs an attempt through the first; that replica is SIGKILLed mid-attempt; the worker moves its
 * session (heartbeats, reports, command stream) to the other, the attempt ends SUCCEEDED once with no
 * WORKER_LOST although it outlives the session's heartbeat TTL, and a task created afterwards runs. A
 * replica that stops answering without going away (its connections frozen) is left the same way.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { type TdpProcess, tdpProcess } from '../../../test/tdpProcess.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';
import { generateKeyringEntry } from '../../server/src/main.ts';
import { defineCapability, LocalStore, WorkerClient, WorkerRuntime } from '../src/index.ts';
import { call, provisionEchoApplication } from './replicas.ts';
import { killAllWorkerProcesses, startWorkerProcess, stopWorkerProcess } from './support.ts';

const adminToken = `tdpadm_failover_${newId()}`;
// A short heartbeat TTL (beats every 2 s), so that an attempt outliving it proves the session moved.
const heartbeatTtlMs = 6_000;
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let first: TdpProcess;
let second: TdpProcess;
let apiKey: string;
let workerKey: string;
const directory = mkdtempSync(join(tmpdir(), 'tdp-failover-test-'));

beforeAll(async () => {
  database = await createTestDatabase();
  const env = {
    TDP_ADMIN_TOKEN: adminToken,
    // Replicas of one deployment share their keys: a token one signs, the other accepts.
    TDP_SECRET_KEYS: generateKeyringEntry('failover'),
    TDP_WORKER_HEARTBEAT_TTL_MS: String(heartbeatTtlMs),
    TDP_LEASE_CHECK_INTERVAL_MS: '500',
  };
  first = tdpProcess({ databaseUrl: database.url, port: await freePort(), env });
  second = tdpProcess({ databaseUrl: database.url, port: await freePort(), env });
  await first.start();
  await second.start();
  ({ apiKey, workerKey } = await provisionEchoApplication(second, adminToken, 'failover', {
    maxAttempts: 3,
    initialBackoffMs: 100,
    maxBackoffMs: 100,
    multiplier: 1,
  }));
}, 120_000);
afterAll(async () => {
  killAllWorkerProcesses();
  await first?.kill();
  await second?.kill();
  await database?.drop();
});

const submit = async (text: string, delayMs: number) =>
  (
    await call(second, 'POST', '/v1/tasks', apiKey, {
      workflowName: 'echo-wf',
      workflowVersion: '1',
      name: text,
      input: { text, delayMs },
    })
  ).body.task.id as string;
const view = async (taskId: string) => (await call(second, 'GET', `/v1/tasks/${taskId}`, apiKey)).body;
const eventTypes = async (taskId: string) =>
  (
    (await call(second, 'GET', `/v1/tasks/${taskId}/events?limit=500`, apiKey)).body.items as {
      eventType: string;
    }[]
  ).map((e) => e.eventType);

describe('worker failover', () => {
  it('a worker moves to the other replica when its replica is SIGKILLed mid-attempt: the attempt succeeds once, no WORKER_LOST', async () => {
    const worker = await startWorkerProcess(
      `${first.url},${second.url}`,
      workerKey,
      join(directory, 'worker.db'),
      'node-failover',
    );
    try {
      // The attempt runs past the heartbeat TTL after the kill: only heartbeats through the other
      // replica keep its lease.
      const taskId = await submit('survives', heartbeatTtlMs + 4_000);
      await expect
        .poll(async () => (await view(taskId)).execution.steps[0]?.status, { timeout: 15_000 })
        .toBe('RUNNING');
      await first.kill('SIGKILL');

      await expect
        .poll(async () => (await view(taskId)).task.lifecycleStatus, { timeout: 30_000, interval: 250 })
        .toBe('SUCCEEDED');
      const done = await view(taskId);
      expect(done.execution.steps[0]).toMatchObject({ attempt: 1, data: { echo: 'survives' } });
      const types = await eventTypes(taskId);
      expect(types.filter((t) => t === 'STEP_COMPLETED')).toHaveLength(1);
      expect(types.filter((t) => t === 'STEP_DISPATCHED')).toHaveLength(1);
      expect(types).not.toContain('STEP_FAILED');

      // The command stream moved too: a task created now is started through the surviving replica.
      const after = await submit('after', 0);
      await expect
        .poll(async () => (await view(after)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      // Still the same worker session (it was never lost).
      const workers = (await call(second, 'GET', '/v1/workers', apiKey)).body as { id: string }[];
      expect(workers.map((w) => w.id)).toEqual([worker.workerId]);
    } finally {
      await stopWorkerProcess(worker);
    }
  }, 90_000);

  it('a worker leaves a replica that stops answering (its connections frozen) for the next one', async () => {
    const proxy = new TcpProxy('127.0.0.1', Number(new URL(second.url).port));
    await proxy.start();
    const client = new WorkerClient([`http://127.0.0.1:${proxy.port}`, second.url], workerKey, 2_000, 3_000);
    const store = new LocalStore(join(directory, 'frozen.db'), newId);
    const runtime = new WorkerRuntime({
      client,
      store,
      nodeId: 'node-frozen',
      capabilities: [
        defineCapability({
          name: 'test.echo',
          version: '1',
          input: Type.Object({ text: Type.String(), delayMs: Type.Integer() }),
          output: Type.Object({ echo: Type.String() }),
          run: async (_ctx, input) => ({ echo: input.text }),
        }),
      ],
    });
    try {
      await runtime.start();
      const before = await submit('before', 0);
      await expect
        .poll(async () => (await view(before)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      // No byte passes any more on the connections through the proxy, and nothing closes them.
      proxy.freeze();
      const after = await submit('frozen', 0);
      await expect
        .poll(async () => (await view(after)).task.lifecycleStatus, { timeout: 20_000, interval: 250 })
        .toBe('SUCCEEDED');
      expect(client.server).toBe(second.url);
      const workers = (await call(second, 'GET', '/v1/workers', apiKey)).body as { id: string }[];
      expect(workers.map((w) => w.id)).toContain(runtime.id);
    } finally {
      await runtime.stop();
      store.close();
      await client.close().catch(() => {});
      await proxy.cut();
    }
  }, 60_000);
});
