/**
 * Grants that last as long as the work, against a real server and a real HTTP resource
 * provider that counts its allocations by the idempotency key TDP sends: a replayed grant past its due
 * time is renewed (a new URL for the same grant), a worker's renewal is its own idempotent request, and
 * an output allocation retried after the server was SIGKILLed mid-ask is allocated once.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { type TdpProcess, tdpProcess } from '../../../test/tdpProcess.ts';
import { startTestWorker } from '../../../test/testWorker.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';
import { connectDatabase } from '../src/main.ts';

interface ProviderCall {
  idempotencyHeader: string | undefined;
  body: Record<string, unknown>;
}

/**
 * A resource provider as the contract asks: the same idempotency key gets the same allocation; each
 * answer is a new URL (`v=`), expiring `ttlMs` after `now()`. `holdNext` keeps an ask unanswered.
 */
function countingProvider(now: () => Date, ttlMs = 10 * 60_000) {
  const calls: ProviderCall[] = [];
  const allocations = new Map<string, string>();
  let held: ((response: ServerResponse) => boolean) | null = null;
  const readBody = async (request: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>;
  };
  const server: Server = createServer(async (request, response) => {
    const body = await readBody(request);
    calls.push({ idempotencyHeader: request.headers['idempotency-key'] as string | undefined, body });
    // An ask without a key can only be told apart by its grant id: a new allocation each time.
    const key = String(body.idempotencyKey ?? request.headers['idempotency-key'] ?? body.grantId);
    if (body.purpose === 'ARTIFACT' && !allocations.has(key)) allocations.set(key, `asset:${newId()}`);
    if (held?.(response)) return;
    const resourceRef = body.purpose === 'ARTIFACT' ? allocations.get(key) : body.resourceRef;
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(
      JSON.stringify({
        url: `https://files.example.com/${resourceRef}?v=${calls.length}`,
        expiresAt: new Date(now().getTime() + ttlMs).toISOString(),
        resourceRef,
        ...(body.purpose === 'ARTIFACT' ? { maxBytes: 1_000 } : {}),
      }),
    );
  });
  return {
    calls,
    allocations,
    /** The next asks get no answer; resolves with the first one's response once it arrives. */
    holdNext: () =>
      new Promise<ServerResponse>((resolve) => {
        held = (response) => {
          resolve(response);
          return true;
        };
      }),
    answerAgain: () => {
      held = null;
    },
    listen: async () => {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return `http://127.0.0.1:${(server.address() as { port: number }).port}/grants`;
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

type Requester = (
  method: string,
  path: string,
  options?: { token?: string; body?: unknown; headers?: Record<string, string> },
) => Promise<{ status: number; body: any }>;

/** An application whose resource provider is at `providerUrl`: its API key. */
async function applicationWith(request: Requester, adminToken: string, providerUrl: string) {
  const tenant = await request('POST', '/admin/v1/tenants', {
    token: adminToken,
    body: { name: `tenant-${newId()}` },
  });
  const created = await request('POST', `/admin/v1/tenants/${tenant.body.id}/applications`, {
    token: adminToken,
    body: { name: `app-${newId()}` },
  });
  const set = await request(
    'PUT',
    `/admin/v1/applications/${created.body.application.id}/resource-provider`,
    {
      token: adminToken,
      body: { url: providerUrl, bearerToken: 'provider-secret-token' },
    },
  );
  expect(set.status).toBe(200);
  return created.body.apiKey.key as string;
}

/** A worker key, and an attempt of the application held by a test worker that never finishes it. */
async function runningAttempt(request: Requester, baseUrl: string, adminToken: string, apiKey: string) {
  const workerKey = (await request('POST', '/admin/v1/worker-credentials', { token: adminToken, body: {} }))
    .body.key;
  const capability = `renew.op${newId().slice(0, 8)}`;
  await request('POST', '/v1/workflow-definitions', {
    token: apiKey,
    body: { name: capability, version: '1', steps: [{ key: 'only', capability, capabilityVersion: '1' }] },
  });
  let resolveCommand!: (c: { attemptId: string; leaseVersion: number }) => void;
  const started = new Promise<{ attemptId: string; leaseVersion: number }>((r) => (resolveCommand = r));
  const worker = await startTestWorker({
    baseUrl,
    workerKey,
    nodeId: `node-${newId()}`,
    capabilities: [{ name: capability, version: '1' }],
    handler: async (command) => resolveCommand(command),
  });
  await request('POST', '/v1/tasks', {
    token: apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName: capability, workflowVersion: '1', name: 'renew' },
  });
  return { worker, workerKey, command: await started };
}

describe('renewal', () => {
  let h: Harness;
  let provider: ReturnType<typeof countingProvider>;
  let apiKey: string;

  beforeAll(async () => {
    h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
    // 40 s grants on the server's clock: moved 25 s on (less than a worker session's TTL), one is due.
    provider = countingProvider(() => h.clock.now(), 40_000);
    apiKey = await applicationWith(h.request, h.adminToken, await provider.listen());
  });
  afterAll(async () => {
    await h?.close();
    await provider?.close();
  });

  it('a replayed grant request past its due time gets a new URL for the same grant, not the expiring one', async () => {
    const { worker, workerKey, command } = await runningAttempt(h.request, h.url, h.adminToken, apiKey);
    try {
      const ask = () =>
        h.request('POST', `/v1/attempts/${command.attemptId}/grants`, {
          token: workerKey,
          headers: { 'idempotency-key': 'download:asset:source' },
          body: { leaseVersion: command.leaseVersion, access: 'DOWNLOAD', resourceRef: 'asset:source' },
        });
      const first = await ask();
      expect(first.status).toBe(200);
      expect((await ask()).body).toEqual(first.body);
      expect(provider.calls).toHaveLength(1);

      // Past half its life, and less than the 60 s `grantReplayRenewal` asks for is left.
      h.clock.advance(25_000);
      const replayed = await ask();
      expect(replayed.status).toBe(200);
      expect(provider.calls).toHaveLength(2);
      expect(replayed.body.grantId).toBe(first.body.grantId);
      expect(replayed.body.url).not.toBe(first.body.url);
      expect(new Date(replayed.body.expiresAt).getTime()).toBe(h.clock.now().getTime() + 40_000);
      // The provider was asked again with the same key and told it is a renewal.
      expect(provider.calls[1]!.body).toMatchObject({
        renewal: true,
        idempotencyKey: provider.calls[0]!.body.idempotencyKey,
        resourceRef: 'asset:source',
      });
      // Fresh again: the next replay is the renewed grant as stored.
      expect((await ask()).body).toEqual(replayed.body);
      expect(provider.calls).toHaveLength(2);
    } finally {
      await worker.stop();
    }
  });

  it("a worker's renewal is its own idempotent request, for the same allocation; bad renewals change nothing", async () => {
    const { worker, workerKey, command } = await runningAttempt(h.request, h.url, h.adminToken, apiKey);
    try {
      const allocated = await h.request('POST', `/v1/attempts/${command.attemptId}/artifacts`, {
        token: workerKey,
        headers: { 'idempotency-key': 'artifact:out/clean.zip' },
        body: {
          leaseVersion: command.leaseVersion,
          relativePath: 'out/clean.zip',
          artifactType: 'ZIP',
          mediaType: 'application/zip',
          maxBytes: 5_000,
        },
      });
      expect(allocated.status).toBe(200);
      const calls = provider.calls.length;
      const renew = (
        key: string,
        body: unknown = { leaseVersion: command.leaseVersion },
        id = allocated.body.grantId,
      ) =>
        h.request('POST', `/v1/attempts/${command.attemptId}/grants/${id}:renew`, {
          token: workerKey,
          headers: { 'idempotency-key': key },
          body,
        });
      const renewed = await renew('renew-1');
      expect(renewed.status).toBe(200);
      expect(renewed.body).toMatchObject({
        grantId: allocated.body.grantId,
        purpose: 'ARTIFACT',
        resourceRef: allocated.body.resourceRef,
      });
      expect(renewed.body.url).not.toBe(allocated.body.url);
      expect(provider.calls).toHaveLength(calls + 1);
      expect((await renew('renew-1')).body).toEqual(renewed.body);
      expect(provider.calls).toHaveLength(calls + 1);
      // One allocation at the provider for the output, however often its URL is renewed.
      expect(provider.allocations.size).toBe(1);

      const stale = await renew('renew-2', { leaseVersion: command.leaseVersion + 1 });
      expect([stale.status, stale.body.code]).toEqual([409, 'STALE_EXECUTION']);
      const unknown = await renew('renew-3', { leaseVersion: command.leaseVersion }, newId());
      expect([unknown.status, unknown.body.code]).toEqual([404, 'GRANT_NOT_FOUND']);
      const malformed = await renew('renew-4', { leaseVersion: 'one' });
      expect([malformed.status, malformed.body.code]).toEqual([400, 'VALIDATION_FAILED']);
      expect(provider.calls).toHaveLength(calls + 1);
    } finally {
      await worker.stop();
    }
  });
});

describe('an output allocation across a crash', () => {
  let database: { url: string; drop(): Promise<void> };
  let tdp: TdpProcess;
  let provider: ReturnType<typeof countingProvider>;

  beforeAll(async () => {
    database = await createTestDatabase();
    tdp = tdpProcess({ databaseUrl: database.url, port: await freePort() });
    provider = countingProvider(() => new Date());
    await tdp.start();
  }, 90_000);
  afterAll(async () => {
    await tdp?.kill();
    await provider?.close();
    await database?.drop();
  });

  it('a server SIGKILLed while the provider allocates: the retry after the restart gets the same allocation', async () => {
    const apiKey = await applicationWith(tdp.request, tdp.adminToken, await provider.listen());
    const { worker, workerKey, command } = await runningAttempt(tdp.request, tdp.url, tdp.adminToken, apiKey);
    const allocate = () =>
      tdp.request('POST', `/v1/attempts/${command.attemptId}/artifacts`, {
        token: workerKey,
        headers: { 'idempotency-key': 'artifact:out/clean.zip' },
        body: {
          leaseVersion: command.leaseVersion,
          relativePath: 'out/clean.zip',
          artifactType: 'ZIP',
          mediaType: 'application/zip',
          maxBytes: 5_000,
        },
      });
    try {
      const asked = provider.holdNext();
      const lost = allocate().catch((error: Error) => error);
      await asked;
      // The provider has allocated; its answer never reaches the server.
      await tdp.kill('SIGKILL');
      expect(await lost).toBeInstanceOf(Error);
      provider.answerAgain();
      await tdp.start();

      const retried = await allocate();
      expect(retried.status).toBe(200);
      expect(provider.calls).toHaveLength(2);
      expect(provider.allocations.size).toBe(1);
      expect(retried.body.resourceRef).toBe([...provider.allocations.values()][0]);
      // Both asks carried the same key, in the header and the body.
      const keys = provider.calls.flatMap((c) => [c.idempotencyHeader, c.body.idempotencyKey]);
      expect(new Set(keys).size).toBe(1);
      expect(keys[0]).toMatch(/^[0-9a-f]{64}$/);
      const sql = connectDatabase({ url: database.url, maxConnections: 1 });
      try {
        const rows = await sql`SELECT state FROM access_grant WHERE attempt_id = ${command.attemptId}`;
        expect(rows.map((r) => r.state)).toEqual(['ISSUED']);
      } finally {
        await sql.end();
      }
    } finally {
      await worker.stop().catch(() => {});
    }
  }, 90_000);
});
