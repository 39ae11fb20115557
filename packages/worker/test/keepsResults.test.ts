/**
 * The worker keeps every result (issue 38, item 7), against a real server:
 * - a worker key revoked mid-run: nothing is dropped, the worker reports KEY_REFUSED (health 503) and
 *   logs it once; once the key works again every result goes out, each once, on the same session; a new
 *   key given to the worker registers a new session, and the revoked session's result is kept unsent;
 * - over gRPC, acknowledgements riding on a refused first event are not taken for written: the command is
 *   acknowledged anyway, so the server stops sending it again;
 * - a grant refused for good (the provider's answer unusable, or the provider refusing) fails the attempt
 *   at once with its code: the provider is asked once.
 */
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId, type WorkerCommand } from '@tdp/protocol';
import { connectDatabase } from '@tdp/server';
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { UnavailableError } from '../src/client.ts';
import { GrpcReporting } from '../src/grpcReporting.ts';
import { serveHealth } from '../src/health.ts';
import { defineCapability, LocalStore, WorkerClient, WorkerRuntime } from '../src/index.ts';
import type { Logger } from '../src/options.ts';
import { submitTask, taskView } from './support.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let sql: ReturnType<typeof connectDatabase>;
let provider: Server;
/** What the resource provider was asked, by resourceRef. */
const asked = new Map<string, number>();
const directory = mkdtempSync(join(tmpdir(), 'tdp-keeps-results-'));

/** Each run waits until the test opens its gate (by the input's `n`). */
const gates = new Map<number, () => void>();
const opened = new Map<number, Promise<void>>();
const gate = (n: number) => {
  if (!opened.has(n)) opened.set(n, new Promise<void>((resolve) => gates.set(n, resolve)));
  return opened.get(n)!;
};
const open = (n: number) => {
  gate(n);
  gates.get(n)!();
};
const gated = (name: string) =>
  defineCapability({
    name,
    version: '1',
    input: Type.Object({ n: Type.Integer() }),
    output: Type.Object({ n: Type.Integer() }),
    resumable: true,
    run: async (_ctx, input) => {
      await gate(input.n);
      return { n: input.n };
    },
  });
const downloader = defineCapability({
  name: 'keep.download',
  version: '1',
  input: Type.Object({ source: Type.String() }),
  output: Type.Object({ path: Type.String() }),
  run: async (ctx, input) => ({ path: await ctx.download(input.source) }),
});

beforeAll(async () => {
  // A provider whose every answer is refused for good: an unusable URL, or a 400.
  provider = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk) => {
      text += chunk;
    });
    request.on('end', () => {
      const ref = (JSON.parse(text) as { resourceRef: string }).resourceRef;
      asked.set(ref, (asked.get(ref) ?? 0) + 1);
      if (ref === 'refused') return void response.writeHead(400).end('{"error":"no such file"}');
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ url: 'ftp://files.example/x', expiresAt: new Date(Date.now() + 60_000) }));
    });
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  h = await startHarness({
    runLoops: true,
    allowInsecureCallbacks: true,
    // A revoked key is refused at once; a command not acknowledged is resent soon.
    // The provider listens on loopback, which the egress policy allows only when named.
    settings: { workerCredentialsCacheMs: 0, commandResendAfterMs: 500, egressAllow: ['127.0.0.1/32'] },
  });
  app = await h.createApplication();
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
  await h.request('PUT', `/admin/v1/applications/${app.applicationId}/resource-provider`, {
    token: h.adminToken,
    body: {
      url: `http://127.0.0.1:${(provider.address() as AddressInfo).port}/grants`,
      bearerToken: 'provider-token',
    },
  });
  for (const [name, capability, inputMapping] of [
    ['keep-wf', 'keep.gated', { n: '$.input.n' }],
    ['ack-wf', 'keep.ack', { n: '$.input.n' }],
    ['download-wf', 'keep.download', { source: '$.input.source' }],
  ] as const)
    await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: {
        name,
        version: '1',
        steps: [{ key: 'only', capability, capabilityVersion: '1', inputMapping, retry: { maxAttempts: 1 } }],
      },
    });
});
afterAll(async () => {
  for (const n of gates.keys()) open(n);
  await sql?.end();
  await h?.close();
  await new Promise((resolve) => provider?.close(resolve));
});

const workerKey = async () =>
  (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })).body as {
    id: string;
    key: string;
  };
const submit = (workflowName: string, input: Record<string, unknown>) =>
  submitTask(h, app.apiKey, workflowName, input);
const task = (taskId: string) => taskView(h, app.apiKey, taskId);
const stepStatus = async (taskId: string) => (await task(taskId)).execution.steps[0]?.status;
const completions = async (taskId: string) =>
  (
    (await h.request('GET', `/v1/tasks/${taskId}/events?limit=500`, { token: app.apiKey })).body.items as {
      eventType: string;
    }[]
  ).filter((e) => e.eventType === 'STEP_COMPLETED').length;
/** Revoked since long ago (the server's clock is a test clock), or not revoked. */
const revoke = (keyId: string, revoked: boolean) =>
  sql`UPDATE worker_credential SET revoked_at = ${revoked ? new Date(0) : null} WHERE id = ${keyId}`;

/** A logger that keeps the lines it is given. */
const recording = () => {
  const lines: { level: string; message: string; fields: Record<string, unknown> }[] = [];
  const at =
    (level: string) =>
    (fields: Record<string, unknown>, message: string): void => {
      lines.push({ level, message, fields });
    };
  return { lines, logger: { info: at('info'), warn: at('warn'), error: at('error') } satisfies Logger };
};

describe('the worker keeps every result', () => {
  it('a key revoked mid-run: results are kept, the worker is unhealthy, and each is delivered once when a key works', async () => {
    const k1 = await workerKey();
    const store = new LocalStore(join(directory, 'revoked.db'), newId);
    const log = recording();
    const runtime = new WorkerRuntime({
      client: new WorkerClient(h.url, k1.key, 5_000),
      store,
      capabilities: [gated('keep.gated')],
      nodeId: 'node-revoked',
      keyRetryMs: 200,
      logger: log.logger,
    });
    await runtime.start();
    const health = await serveHealth(runtime, 0, '127.0.0.1');
    const healthz = async () => (await fetch(`${health.url}/healthz`)).status;
    try {
      const session = runtime.id;
      const tasks = [
        await submit('keep-wf', { n: 1 }),
        await submit('keep-wf', { n: 2 }),
        await submit('keep-wf', { n: 3 }),
      ];
      for (const taskId of tasks)
        await expect.poll(() => stepStatus(taskId), { timeout: 15_000 }).toBe('RUNNING');

      await revoke(k1.id, true);
      // The first result meets the refused key: nothing of it is dropped, and nothing more is sent.
      open(1);
      await expect.poll(() => runtime.status().state, { timeout: 10_000 }).toBe('KEY_REFUSED');
      open(2);
      open(3);
      await expect.poll(() => store.unsentCount(), { timeout: 5_000 }).toBe(3);
      // Several rounds of trying the key again.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(store.unsentCount()).toBe(3);
      expect(await healthz()).toBe(503);
      for (const taskId of tasks) expect(await stepStatus(taskId)).toBe('RUNNING');
      expect(log.lines.filter((l) => l.message.startsWith('worker key refused'))).toHaveLength(1);
      expect(JSON.stringify(log.lines)).not.toContain(k1.key);

      // The key works again (while the server still holds the session): the same session goes on.
      await revoke(k1.id, false);
      for (const taskId of tasks)
        await expect
          .poll(async () => (await task(taskId)).task.lifecycleStatus, { timeout: 15_000 })
          .toBe('SUCCEEDED');
      expect(runtime.id).toBe(session);
      expect(runtime.status().state).toBe('READY');
      expect(await healthz()).toBe(200);
      expect(store.unsentCount()).toBe(0);
      for (const [i, taskId] of tasks.entries()) {
        expect((await task(taskId)).execution.steps[0].data).toEqual({ n: i + 1 });
        expect(await completions(taskId)).toBe(1);
      }

      // Revoked for good, and a new key given: a new session takes work; the old session's result is
      // refused with the new key, and kept rather than marked sent.
      const held = await submit('keep-wf', { n: 4 });
      await expect.poll(() => stepStatus(held), { timeout: 15_000 }).toBe('RUNNING');
      await revoke(k1.id, true);
      open(4);
      await expect.poll(() => runtime.status().state, { timeout: 10_000 }).toBe('KEY_REFUSED');
      const k2 = await workerKey();
      runtime.setWorkerKey(k2.key);
      await expect.poll(() => runtime.status().state, { timeout: 10_000 }).toBe('READY');
      expect(runtime.id).not.toBe(session);
      // The operator drains the revoked key's session, so that nothing new is placed on it (its
      // stream is closed: the DRAIN reaches no one).
      await h.request('POST', `/admin/v1/workers/${session}:drain`, {
        token: h.adminToken,
        body: { reason: 'its key is revoked' },
      });
      const fresh = await submit('keep-wf', { n: 5 });
      open(5);
      await expect
        .poll(async () => (await task(fresh)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      expect(store.unsentCount()).toBe(1);
      expect(await completions(held)).toBe(0);
    } finally {
      await health.close();
      await runtime.stop();
      store.close();
    }
  }, 90_000);

  it('over gRPC, acknowledgements on a refused first event are sent again, so the server stops resending the command', async () => {
    const key = (await workerKey()).key;
    // Acknowledgements ride on events only here: the REST acknowledgement loop, which would send what
    // the events did not carry, is out of use.
    class AcksOnEventsOnly extends WorkerClient {
      override async ack(): Promise<never> {
        throw new UnavailableError('acknowledgements ride on events in this test');
      }
    }
    const client = new AcksOnEventsOnly(h.url, key, 5_000);
    const store = new LocalStore(join(directory, 'acks.db'), newId);
    const options = {
      client,
      store,
      capabilities: [gated('keep.ack')],
      nodeId: 'node-acks',
    };
    // A session that then stops listening: the step placed on it waits for it, unacknowledged.
    const first = new WorkerRuntime(options);
    await first.start();
    const workerId = first.id!;
    await first.stop();
    const taskId = await submit('ack-wf', { n: 10 });
    const starts = () =>
      sql<
        { id: string }[]
      >`SELECT id FROM worker_command WHERE worker_id = ${workerId} AND type = 'START_ATTEMPT'`;
    await expect.poll(async () => (await starts()).length, { timeout: 10_000 }).toBe(1);
    const [command] = await starts();
    // The command as the stream delivers it, recorded as the worker records it, and then an event the
    // server refuses (progress above 100) waiting in the outbox ahead of everything else.
    const stop = new AbortController();
    const start = await new Promise<WorkerCommand>((resolve, reject) => {
      client
        .streamCommands(workerId, null, stop.signal, (c) => {
          if (c.commandId === command!.id) {
            resolve(c);
            stop.abort();
          }
        })
        .catch(reject);
    });
    const { commandId, type, ...payload } = start;
    store.receive(workerId, { commandId, type, payload });
    const attemptId = (start as { attemptId: string }).attemptId;
    store.record(attemptId, { eventType: 'STEP_PROGRESS', progress: { percent: 150 } });

    const runtime = new WorkerRuntime({
      ...options,
      reporting: new GrpcReporting(`127.0.0.1:${h.server.grpcPort}`, key),
    });
    await runtime.start();
    const ackedAt = async () =>
      (
        await sql<{ acked_at: Date | null }[]>`SELECT acked_at FROM worker_command WHERE id = ${commandId}`
      )[0]!.acked_at;
    try {
      expect(runtime.id).toBe(workerId);
      // The refused event is answered (and done with); its acknowledgement was not written.
      await expect.poll(() => store.unsentCount(), { timeout: 10_000 }).toBe(0);
      expect(await ackedAt()).toBeNull();
      // The step's next event carries it again.
      open(10);
      await expect
        .poll(async () => (await task(taskId)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      await expect.poll(ackedAt, { timeout: 5_000 }).not.toBeNull();
    } finally {
      open(10);
      await runtime.stop();
      store.close();
    }
  }, 60_000);

  it('a grant refused for good fails the attempt at once with its code; the provider is asked once', async () => {
    const store = new LocalStore(join(directory, 'grants.db'), newId);
    const runtime = new WorkerRuntime({
      client: new WorkerClient(h.url, (await workerKey()).key, 5_000),
      store,
      capabilities: [downloader],
      nodeId: 'node-grants',
      // Long enough that a refusal taken for a passing failure would show as GRANT_UNAVAILABLE.
      grantRetryMs: 5_000,
    });
    await runtime.start();
    try {
      const invalid = await submit('download-wf', { source: 'unusable' });
      const refused = await submit('download-wf', { source: 'refused' });
      for (const [taskId, code] of [
        [invalid, 'RESOURCE_PROVIDER_INVALID'],
        [refused, 'RESOURCE_PROVIDER_REFUSED'],
      ] as const) {
        await expect
          .poll(async () => (await task(taskId)).task.lifecycleStatus, { timeout: 15_000 })
          .toBe('FAILED');
        expect((await task(taskId)).task.failure).toMatchObject({ code });
      }
      expect(asked.get('unusable')).toBe(1);
      expect(asked.get('refused')).toBe(1);
      expect(runtime.status().state).toBe('READY');
    } finally {
      await runtime.stop();
      store.close();
    }
  }, 60_000);
});
