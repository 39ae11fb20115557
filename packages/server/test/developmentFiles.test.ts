/**
 * The development resource provider (src/features/development/, docs/resource-provider.md): served only when the
 * configuration names a files folder (`tdp dev`), registered for an application unless it has its own
 * provider, granting files under the folder (outputs in tasks/<task id>/) and https:// — in development
 * http:// — URLs as inputs; its file URLs are signed, bounded and expire. End to end: a real task whose
 * input is an http:// URL runs on a real worker and its output lands in the folder.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinCapabilities, type RunningWorker, silentLogger, startWorker } from '@tdp/worker';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { readZip, writeZip } from '../../worker/test/zips.ts';
import { registerDevelopmentFiles } from '../src/features/development/developmentFiles.ts';
import { configFromEnv, generateKeyringEntry, useDevelopmentProvider } from '../src/main.ts';

const folder = mkdtempSync(join(tmpdir(), 'tdp-dev-files-'));
const providerToken = randomBytes(16).toString('hex');
let h: Harness;
let plain: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let worker: RunningWorker;
let inputs: Server;
let inputsUrl: string;

const ask = (body: Record<string, unknown>, token = providerToken) =>
  h.request('POST', '/dev/resource-provider', { token, body });

beforeAll(async () => {
  h = await startHarness({
    runLoops: true,
    allowInsecureCallbacks: true,
    developmentFiles: { directory: folder, providerToken },
  });
  plain = await startHarness();
  app = await h.createApplication();
  await writeZip(join(folder, 'photos.zip'), { 'a.txt': 'kept', '.DS_Store': 'junk' });
  // An input served over plain http, as a URL (development only).
  inputs = createServer(async (_request, response) => {
    response
      .writeHead(200, { 'content-type': 'application/zip' })
      .end(await readFile(join(folder, 'photos.zip')));
  });
  await new Promise<void>((resolve) => inputs.listen(0, '127.0.0.1', resolve));
  inputsUrl = `http://127.0.0.1:${(inputs.address() as { port: number }).port}/photos.zip`;
});

afterAll(async () => {
  await worker?.drain();
  await new Promise((resolve) => inputs?.close(resolve));
  await plain?.close();
  await h?.close();
});

describe('the development resource provider', () => {
  it('is not served unless configured: tdp server never names a files folder', async () => {
    expect((await plain.request('POST', '/dev/resource-provider', { body: {} })).status).toBe(404);
    expect((await plain.request('GET', '/dev/files/photos.zip')).status).toBe(404);
    const env = { DATABASE_URL: 'postgres://x/y', TDP_ADMIN_TOKEN: 'a'.repeat(20) };
    expect(configFromEnv({ ...env, TDP_SECRET_KEYS: generateKeyringEntry('k') }).developmentFiles).toBeNull();
  });

  it("is registered for an application, and never replaces an application's own provider", async () => {
    const own = await h.createApplication();
    await h.request('PUT', `/admin/v1/applications/${own.applicationId}/resource-provider`, {
      token: h.adminToken,
      body: { url: 'https://app.example.com/tdp/grants', bearerToken: 'theirs' },
    });
    expect(
      await useDevelopmentProvider(h.server.identity, own.applicationId, h.server.developmentProvider!),
    ).toBe('own provider');
    // Ours is registered, and registered again on the next start (the port may have changed).
    for (let start = 0; start < 2; start += 1)
      expect(
        await useDevelopmentProvider(h.server.identity, app.applicationId, h.server.developmentProvider!),
      ).toBe('registered');
    const providerOf = async (id: string) => {
      const read = await h.request('GET', `/admin/v1/applications/${id}`, { token: h.adminToken });
      return (read.body.application ?? read.body).resourceProviderUrl;
    };
    expect(await providerOf(own.applicationId)).toBe('https://app.example.com/tdp/grants');
    expect(await providerOf(app.applicationId)).toBe(`${h.url}/dev/resource-provider`);
  });

  it('grants files under the folder with signed, bounded URLs, and refuses what is not there or outside it', async () => {
    expect((await ask({ purpose: 'DOWNLOAD', resourceRef: 'photos.zip' }, 'wrong')).status).toBe(401);
    expect((await ask({ purpose: 'DOWNLOAD', resourceRef: 'missing.zip' })).body.code).toBe('FILE_NOT_FOUND');
    for (const outside of ['../photos.zip', '/etc/passwd', 'a/../../b'])
      expect((await ask({ purpose: 'DOWNLOAD', resourceRef: outside })).status, outside).toBe(400);

    const download = await ask({ purpose: 'DOWNLOAD', resourceRef: 'photos.zip' });
    expect(download.body).toMatchObject({ method: 'GET', resourceRef: 'photos.zip' });
    const bytes = Buffer.from(await (await fetch(download.body.url)).arrayBuffer());
    expect(bytes.equals(await readFile(join(folder, 'photos.zip')))).toBe(true);
    // One character of the signature changed (to another one, whatever it was).
    const tampered = download.body.url.replace(/signature=(.)/, (_: string, c: string) =>
      c === 'A' ? 'signature=B' : 'signature=A',
    );
    expect((await fetch(tampered)).status).toBe(401);
    // You download with an API key; without one (or a signature) nothing.
    expect((await fetch(`${h.url}/dev/files/photos.zip`)).status).toBe(401);
    const mine = await fetch(`${h.url}/dev/files/photos.zip`, {
      headers: { authorization: `Bearer ${app.apiKey}` },
    });
    expect([mine.status, mine.headers.get('content-type')]).toEqual([200, 'application/zip']);

    const artifact = await ask({
      purpose: 'ARTIFACT',
      taskId: 'task-1',
      artifact: { relativePath: 'clean/out.zip', maxBytes: 10 },
    });
    expect(artifact.body).toMatchObject({
      method: 'PUT',
      maxBytes: 10,
      resourceRef: 'tasks/task-1/clean/out.zip',
    });
    const put = (body: string, url = artifact.body.url) =>
      fetch(url, { method: 'PUT', headers: { 'content-type': 'application/zip' }, body });
    expect((await put('more than ten bytes')).status).toBe(413);
    expect((await put('0123456789', artifact.body.url.replace('method=PUT', 'method=GET'))).status).toBe(403);
    expect((await put('0123456789')).status).toBe(201);
    expect(await readFile(join(folder, 'tasks/task-1/clean/out.zip'), 'utf8')).toBe('0123456789');
  });

  it('passes https:// inputs through, and http:// ones only where insecure URLs are allowed', async () => {
    const https = await ask({ purpose: 'DOWNLOAD', resourceRef: 'https://example.com/a.zip' });
    expect(https.body).toMatchObject({ url: 'https://example.com/a.zip', method: 'GET' });
    expect((await ask({ purpose: 'DOWNLOAD', resourceRef: inputsUrl })).body.url).toBe(inputsUrl);

    const strict = Fastify();
    registerDevelopmentFiles(strict, {
      directory: folder,
      providerToken,
      signingKey: randomBytes(32),
      authenticator: { authenticate: async () => null } as never,
      clock: { now: () => new Date() },
      allowInsecureUrls: false,
      grantTtlMs: 60_000,
      maxBytes: 1000,
    });
    const refused = await strict.inject({
      method: 'POST',
      url: '/dev/resource-provider',
      headers: { authorization: `Bearer ${providerToken}`, 'content-type': 'application/json' },
      payload: { purpose: 'DOWNLOAD', resourceRef: inputsUrl },
    });
    expect([refused.statusCode, refused.json().code]).toEqual([403, 'FORBIDDEN']);
    await strict.close();
  });

  it('runs a real task on an http:// input, its output written under tasks/<task id>/', async () => {
    await useDevelopmentProvider(h.server.identity, app.applicationId, h.server.developmentProvider!);
    const workerKey = (
      await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
    ).body.key;
    worker = await startWorker({
      url: h.url,
      key: workerKey,
      capabilities: builtinCapabilities,
      database: join(folder, 'worker.db'),
      handleSignals: false,
      logger: silentLogger,
    });
    await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: {
        name: 'clean',
        version: '1',
        steps: [
          {
            key: 'clean',
            capability: 'archive.clean',
            capabilityVersion: '1',
            inputMapping: { source: '$.input.source' },
          },
        ],
      },
    });
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'http-input' },
      body: { workflowName: 'clean', workflowVersion: '1', name: 'http input', input: { source: inputsUrl } },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const taskId = created.body.task.id as string;
    let view: any;
    const deadline = Date.now() + 30_000;
    do {
      await new Promise((resolve) => setTimeout(resolve, 100));
      view = (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
    } while (!['SUCCEEDED', 'FAILED'].includes(view.task.lifecycleStatus) && Date.now() < deadline);
    expect(view.task.lifecycleStatus, JSON.stringify(view.task.failure)).toBe('SUCCEEDED');
    const ref = view.execution.steps[0].data.archive;
    expect(ref).toBe(`tasks/${taskId}/clean/archive.zip`);
    const cleaned = await readZip(join(folder, ref));
    expect([...cleaned.keys()]).toEqual(['a.txt']);
  });
});
