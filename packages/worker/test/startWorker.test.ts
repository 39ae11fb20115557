/**
 * `startWorker()`, the worker in someone else's program: it registers, serves its health endpoint
 * (liveness and readiness, as JSON), reports a bad option as a configuration error before touching
 * anything, and a drain tells the server (no more work for it) and closes the endpoint.
 */
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Type } from 'typebox';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { defineCapability, silentLogger, startWorker, WorkerConfigError } from '../src/index.ts';

let h: Harness;
let workerKey: string;
const directory = mkdtempSync(join(tmpdir(), 'tdp-start-worker-test-'));

const echo = defineCapability({
  name: 'test.echo',
  version: '1',
  input: Type.Object({ text: Type.String() }),
  output: Type.Object({ text: Type.String() }),
  run: async (_ctx, input) => ({ text: input.text }),
});

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
});
afterAll(() => h.close());

it('serves /healthz and /readyz while registered, and a drain tells the server and closes the endpoint', async () => {
  const worker = await startWorker({
    url: h.url,
    key: workerKey,
    capabilities: [echo],
    database: join(directory, 'health.db'),
    healthPort: 0,
    handleSignals: false,
    logger: silentLogger,
  });
  expect(worker.healthUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  const ready = await fetch(`${worker.healthUrl}/readyz`);
  expect(ready.status).toBe(200);
  expect(await ready.json()).toEqual({ status: 'ok', workerId: worker.id, state: 'READY', running: 0 });
  expect((await fetch(`${worker.healthUrl}/healthz`)).status).toBe(200);
  expect((await fetch(`${worker.healthUrl}/metrics`)).status).toBe(404);

  const sessions = async () =>
    (await h.request('GET', '/v1/workers', { token: h.adminToken })).body as Record<string, unknown>[];
  const session = async () => (await sessions()).find((s) => s.id === worker.id);
  expect(await session()).toMatchObject({ runtimeState: 'READY', capabilities: [{ name: 'test.echo' }] });

  await worker.drain();
  expect(await session()).toMatchObject({ runtimeState: 'DRAINING' });
  expect(worker.runtime.status().state).toBe('STOPPED');
  await expect(fetch(`${worker.healthUrl}/healthz`)).rejects.toThrow();
  await expect(worker.done).resolves.toBeUndefined();
});

it('refuses a key that is not a worker key, and a bad concurrency, as configuration errors', async () => {
  const base = { url: h.url, capabilities: [echo], handleSignals: false, logger: silentLogger };
  await expect(startWorker({ ...base, key: 'tdp_app_key' })).rejects.toThrow(WorkerConfigError);
  await expect(startWorker({ ...base, key: workerKey, concurrency: 0 })).rejects.toThrow(WorkerConfigError);
  await expect(startWorker({ ...base, key: workerKey, url: 'not a url' })).rejects.toThrow(WorkerConfigError);
});

it('a health port in use fails the start before the worker registers, and leaves nothing open', async () => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const port = (taken.address() as AddressInfo).port;
  try {
    await expect(
      startWorker({
        url: h.url,
        key: workerKey,
        capabilities: [echo],
        database: join(directory, 'port-in-use.db'),
        nodeId: 'port-in-use',
        healthPort: port,
        handleSignals: false,
        logger: silentLogger,
      }),
    ).rejects.toThrow(/EADDRINUSE/);
    const sessions = (await h.request('GET', '/v1/workers', { token: h.adminToken })).body as {
      nodeId: string;
    }[];
    expect(sessions.map((s) => s.nodeId)).not.toContain('port-in-use');
  } finally {
    taken.close();
  }
});
