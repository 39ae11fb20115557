/**
 * `startWorker()`, the worker in someone else's program: it registers, serves its health endpoint
 * (liveness and readiness, as JSON), reports a bad option as a configuration error before touching
 * anything, and a drain tells the server (no more work for it) and closes the endpoint.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
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

/**
 * Between a worker program and the server, an HTTP hop that holds the registration for a moment: a signal
 * sent once `registrationSeen` resolves arrives while the program waits for it.
 */
async function registrationHoldingHop() {
  let registering!: () => void;
  const registrationSeen = new Promise<void>((resolve) => {
    registering = resolve;
  });
  const hop = createServer((request, response) => {
    const forward = async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      if (request.url === '/v1/workers/register') {
        registering();
        await new Promise((resolve) => setTimeout(resolve, 1_500));
      }
      const answer = await fetch(`${h.url}${request.url}`, {
        method: request.method!,
        headers: Object.fromEntries(
          Object.entries(request.headers).filter(
            ([name]) => !['host', 'connection', 'content-length'].includes(name),
          ),
        ) as Record<string, string>,
        ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
      });
      response.writeHead(answer.status, Object.fromEntries(answer.headers));
      if (!answer.body) return response.end();
      for await (const chunk of answer.body) response.write(chunk);
      response.end();
    };
    forward().catch(() => response.destroy());
  });
  await new Promise<void>((resolve) => hop.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(hop.address() as AddressInfo).port}`,
    registrationSeen,
    close: () => hop.close(),
  };
}

/** Sends SIGTERM while the program registers through the hop; how the program ended. */
async function signalWhileRegistering(args: string[], env: (hopUrl: string) => Record<string, string>) {
  const hop = await registrationHoldingHop();
  const child = spawn(process.execPath, ['--conditions=@tdp/source', '--import', 'tsx', ...args], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    env: { ...process.env, ...env(hop.url) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    await hop.registrationSeen;
    child.kill('SIGTERM');
    return await exited;
  } finally {
    child.kill('SIGKILL');
    hop.close();
  }
}

it('a SIGTERM while the worker is still registering drains it once registered, and it exits 0', async () => {
  const program = `
    import { defineCapability, silentLogger, startWorker } from '@tdp/worker';
    import { Type } from 'typebox';
    const echo = defineCapability({ name: 'test.echo', version: '1', input: Type.Object({}), output: Type.Object({}), run: async () => ({}) });
    await startWorker({ url: process.env.HOP, key: process.env.KEY, capabilities: [echo], database: process.env.DB, logger: silentLogger });
  `;
  // Before the fix the signal found no handler yet: the process died of it (code null, SIGTERM).
  expect(
    await signalWhileRegistering(['--input-type=module', '-e', program], (hopUrl) => ({
      HOP: hopUrl,
      KEY: workerKey,
      DB: join(directory, 'signal-while-starting.db'),
    })),
  ).toEqual({ code: 0, signal: null });
}, 60_000);

it('tdp worker: a SIGTERM while it is still registering drains it once registered, and it exits 0', async () => {
  // The CLI's own handler went in only once the start was over (the consumer-project test saw exit null).
  const cli = fileURLToPath(new URL('../../cli/src/main.ts', import.meta.url));
  expect(
    await signalWhileRegistering([cli, 'worker'], (hopUrl) => ({
      TDP_URL: hopUrl,
      TDP_WORKER_KEY: workerKey,
      TDP_WORKER_DB: join(directory, 'cli-signal-while-starting.db'),
      TDP_NODE_ID: 'cli-signal',
    })),
  ).toEqual({ code: 0, signal: null });
}, 60_000);
