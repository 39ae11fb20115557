/**
 * Access grants: a worker asks for a URL for its attempt; TDP asks the application's resource provider
 * (a real HTTP server here), checks the answer, stores it sealed, and answers the same key the same way.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { startTestWorker } from '../../../test/testWorker.ts';
import { checkAnswer } from '../src/core/grants/grants.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
let sql: ReturnType<typeof connectDatabase>;
let provider: Server;
let providerUrl: string;
/** What the fake provider received, and what it answers next. */
let calls: { authorization: string | undefined; body: Record<string, unknown> }[] = [];
let answer: (body: Record<string, unknown>) => { status: number; body: unknown };

const readBody = async (request: IncomingMessage) => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString());
};

beforeAll(async () => {
  provider = createServer(async (request, response) => {
    const body = await readBody(request);
    calls.push({ authorization: request.headers.authorization, body });
    const reply = answer(body);
    response.writeHead(reply.status, { 'content-type': 'application/json' });
    response.end(JSON.stringify(reply.body));
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  const address = provider.address() as { port: number };
  providerUrl = `http://127.0.0.1:${address.port}/grants`;
  h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
  app = await h.createApplication();
  const set = await h.request('PUT', `/admin/v1/applications/${app.applicationId}/resource-provider`, {
    token: h.adminToken,
    body: { url: providerUrl, bearerToken: 'provider-secret-token' },
  });
  expect(set.status).toBe(200);
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'grant-wf',
      version: '1',
      steps: [{ key: 'only', capability: 'grant.op', capabilityVersion: '1' }],
    },
  });
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
});
afterAll(async () => {
  await sql.end();
  await h.close();
  await new Promise((resolve) => provider.close(resolve));
});
beforeEach(() => {
  calls = [];
  answer = (body) => ({
    status: 200,
    body: {
      url: `https://files.example.com/${body.purpose === 'ARTIFACT' ? 'new/out.zip' : body.resourceRef}?sig=abc`,
      method: body.purpose === 'DOWNLOAD' ? 'GET' : 'PUT',
      expiresAt: new Date(Date.now() + 600_000).toISOString(),
      ...(body.purpose === 'ARTIFACT' ? { resourceRef: 'asset:new-output', maxBytes: 1_000 } : {}),
    },
  });
});

/** A running attempt on a test worker that never finishes it. */
async function runningAttempt() {
  let resolveCommand!: (c: { attemptId: string; leaseVersion: number }) => void;
  const started = new Promise<{ attemptId: string; leaseVersion: number }>((r) => (resolveCommand = r));
  const worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: `node-${newId()}`,
    capabilities: [{ name: 'grant.op', version: '1' }],
    handler: async (command) => resolveCommand(command),
  });
  await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName: 'grant-wf', workflowVersion: '1', name: 'grant' },
  });
  return { worker, command: await started };
}

const grant = (attemptId: string, body: Record<string, unknown>, key = newId(), token = workerKey) =>
  h.request('POST', `/v1/attempts/${attemptId}/grants`, {
    token,
    headers: { 'idempotency-key': key },
    body,
  });

describe('grants', () => {
  it('asks the provider with the application token, returns the checked answer, stores it sealed, and replays the same key', async () => {
    const { worker, command } = await runningAttempt();
    try {
      const body = {
        leaseVersion: command.leaseVersion,
        access: 'DOWNLOAD',
        resourceRef: 'asset:source-zip',
      };
      const key = newId();
      const first = await grant(command.attemptId, body, key);
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({
        purpose: 'DOWNLOAD',
        method: 'GET',
        url: 'https://files.example.com/asset:source-zip?sig=abc',
        resourceRef: 'asset:source-zip',
      });
      expect(calls).toHaveLength(1);
      expect(calls[0]!.authorization).toBe('Bearer provider-secret-token');
      expect(calls[0]!.body).toMatchObject({
        attemptId: command.attemptId,
        applicationId: app.applicationId,
        purpose: 'DOWNLOAD',
        resourceRef: 'asset:source-zip',
      });
      const [row] = await sql`SELECT answer_sealed FROM access_grant WHERE id = ${first.body.grantId}`;
      expect(row!.answer_sealed).not.toContain('files.example.com');

      const again = await grant(command.attemptId, body, key);
      expect(again.body).toEqual(first.body);
      expect(calls).toHaveLength(1);
      const reused = await grant(command.attemptId, { ...body, resourceRef: 'asset:other' }, key);
      expect(reused.status).toBe(409);
      expect(reused.body.code).toBe('IDEMPOTENCY_KEY_REUSED');

      const artifact = await h.request('POST', `/v1/attempts/${command.attemptId}/artifacts`, {
        token: workerKey,
        headers: { 'idempotency-key': newId() },
        body: {
          leaseVersion: command.leaseVersion,
          relativePath: 'out/clean.zip',
          artifactType: 'ZIP',
          mediaType: 'application/zip',
          maxBytes: 5_000,
        },
      });
      expect(artifact.status).toBe(200);
      expect(artifact.body).toMatchObject({
        method: 'PUT',
        maxBytes: 1_000,
        resourceRef: 'asset:new-output',
      });
      expect(calls[1]!.body.artifact).toEqual({
        relativePath: 'out/clean.zip',
        artifactType: 'ZIP',
        mediaType: 'application/zip',
        maxBytes: 5_000,
      });
    } finally {
      await worker.stop();
    }
  });

  it('refuses a stale lease, another key, and an unusable answer; the provider is not asked for the first two', async () => {
    const { worker, command } = await runningAttempt();
    try {
      const body = { leaseVersion: command.leaseVersion, access: 'DOWNLOAD', resourceRef: 'asset:x' };
      const stale = await grant(command.attemptId, { ...body, leaseVersion: command.leaseVersion + 1 });
      expect(stale.status).toBe(409);
      expect(stale.body.code).toBe('STALE_EXECUTION');
      const otherKey = (
        await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
      ).body.key;
      const foreign = await grant(command.attemptId, body, newId(), otherKey);
      expect(foreign.status).toBe(404);
      expect(foreign.body.code).toBe('ATTEMPT_NOT_FOUND');
      expect(calls).toHaveLength(0);

      answer = () => ({
        status: 200,
        body: { url: 'ftp://files.example.com/x', expiresAt: new Date(Date.now() + 60_000) },
      });
      const bad = await grant(command.attemptId, body);
      expect(bad.status).toBe(502);
      expect(bad.body.code).toBe('RESOURCE_PROVIDER_INVALID');
      answer = () => ({ status: 403, body: { error: 'no' } });
      expect((await grant(command.attemptId, body)).body.code).toBe('RESOURCE_PROVIDER_REFUSED');
      answer = () => ({ status: 503, body: {} });
      const down = await grant(command.attemptId, body);
      expect(down.status).toBe(502);
      expect(down.body).toMatchObject({ code: 'RESOURCE_PROVIDER_FAILED', retryable: true });
      const count =
        await sql`SELECT state, count(*)::int AS n FROM access_grant WHERE attempt_id = ${command.attemptId} GROUP BY state`;
      // No grant issued; the reservations the provider did not refuse stay for a retry to complete.
      expect(count).toEqual([{ state: 'RESERVED', n: 2 }]);
    } finally {
      await worker.stop();
    }
  });
});

describe('checkAnswer', () => {
  const now = new Date('2026-01-01T00:00:00Z');
  const soon = '2026-01-01T00:10:00Z';
  const download = { leaseVersion: 1, idempotencyKey: 'k', purpose: 'DOWNLOAD' as const, resourceRef: 'r' };
  const upload = {
    leaseVersion: 1,
    idempotencyKey: 'k',
    purpose: 'ARTIFACT' as const,
    artifact: { relativePath: 'a', artifactType: 'ZIP', mediaType: 'application/zip', maxBytes: 100 },
  };
  it.each([
    ['no object', null, download, 'is not a JSON object'],
    ['file scheme', { url: 'file:///etc/passwd', expiresAt: soon }, download, 'url must use'],
    [
      'PUT to download',
      { url: 'https://x/y', method: 'PUT', expiresAt: soon },
      download,
      'method must be GET',
    ],
    [
      'GET to upload',
      { url: 'https://x/y', method: 'GET', expiresAt: soon, resourceRef: 'n' },
      upload,
      'method must be PUT',
    ],
    ['expired', { url: 'https://x/y', expiresAt: '2025-12-31T23:59:00Z' }, download, 'expired already'],
    ['two days', { url: 'https://x/y', expiresAt: '2026-01-03T00:00:00Z' }, download, 'more than 24 hours'],
    [
      'more bytes',
      { url: 'https://x/y', expiresAt: soon, maxBytes: 101, resourceRef: 'n' },
      upload,
      'more than the 100',
    ],
    ['no new ref', { url: 'https://x/y', expiresAt: soon }, upload, 'names no resourceRef'],
    ['bad headers', { url: 'https://x/y', expiresAt: soon, headers: { a: 1 } }, download, 'headers must map'],
  ])('refuses %s', (_name, body, request, problem) => {
    const result = checkAnswer(body, request, now, false);
    expect(typeof result).toBe('string');
    expect(result).toContain(problem);
  });

  it('accepts a good upload answer, taking the asked size when none is given', () => {
    expect(
      checkAnswer({ url: 'https://x/y', expiresAt: soon, resourceRef: 'n' }, upload, now, false),
    ).toEqual({
      url: 'https://x/y',
      method: 'PUT',
      headers: {},
      expiresAt: new Date(soon).toISOString(),
      maxBytes: 100,
      resourceRef: 'n',
    });
  });
});
