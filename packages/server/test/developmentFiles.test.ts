/**
 * The development resource provider (src/features/development/, docs/resource-provider.md): served only when the
 * configuration names a files folder (`tdp dev`), registered for an application unless it has its own
 * provider, granting files under the folder (outputs in tasks/<task id>/) and https:// — in development
 * http:// — URLs as inputs; its file URLs are signed, bounded and expire. End to end: a real task whose
 * input is an http:// URL runs on a real worker and its output lands in the folder.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinCapabilities } from '@tdp/capabilities';
import { type RunningWorker, silentLogger, startWorker } from '@tdp/worker';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { readZip, writeZip } from '../../capabilities/test/zips.ts';
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

let umask = 0;

beforeAll(async () => {
  // A folder from before, open to all, and the loosest umask: the modes checked below are the server's.
  chmodSync(folder, 0o755);
  umask = process.umask(0);
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
  process.umask(umask);
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
      servesApplication: async () => false,
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
      // The http:// input is served on 127.0.0.1, as `tdp dev` allows (TDP_EGRESS_ALLOW's default there).
      egressAllow: ['127.0.0.0/8'],
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

describe("the development files are the development application's alone", () => {
  const modeOf = (path: string) => (statSync(path).mode & 0o777).toString(8);
  const download = (ref: string, token: string) =>
    fetch(`${h.url}/dev/files/${ref}`, { headers: { authorization: `Bearer ${token}` } });

  it('keeps the folder 0700 and writes files 0600 in 0700 folders', () => {
    expect(modeOf(folder)).toBe('700');
    // Written by the PUT above (and by the real task's worker).
    expect(modeOf(join(folder, 'tasks/task-1/clean/out.zip'))).toBe('600');
    expect([modeOf(join(folder, 'tasks/task-1')), modeOf(join(folder, 'tasks/task-1/clean'))]).toEqual([
      '700',
      '700',
    ]);
  });

  it("serves them only to the application it is the provider of: to another one's key they do not exist", async () => {
    expect((await download('photos.zip', app.apiKey)).status).toBe(200);
    const otherTenant = await h.createApplication();
    const sameTenant = await h.createApplicationIn(app.tenantId);
    for (const other of [otherTenant, sameTenant])
      for (const ref of ['photos.zip', 'missing.zip']) {
        const refused = await download(ref, other.apiKey);
        // The same answer as for a file that is not there: nothing tells it exists.
        expect([refused.status, ((await refused.json()) as { code: string }).code], ref).toEqual([
          404,
          'FILE_NOT_FOUND',
        ]);
      }
  });

  it('never reads or writes through a link out of the folder, nor a path with .., absolute or NUL', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'tdp-dev-files-outside-'));
    writeFileSync(join(outside, 'secret.txt'), 'not yours');
    symlinkSync(join(outside, 'secret.txt'), join(folder, 'leak.txt'));
    symlinkSync(outside, join(folder, 'out'));
    // A link that stays inside the folder is a file like any other.
    mkdirSync(join(folder, 'inner'));
    symlinkSync(join(folder, 'photos.zip'), join(folder, 'inner', 'photos.zip'));
    expect((await download('inner/photos.zip', app.apiKey)).status).toBe(200);

    for (const ref of ['leak.txt', 'out/secret.txt']) {
      expect((await download(ref, app.apiKey)).status, ref).toBe(404);
      expect((await ask({ purpose: 'DOWNLOAD', resourceRef: ref })).body.code, ref).toBe('FILE_NOT_FOUND');
    }
    for (const ref of [
      '..%2F..%2Fetc%2Fpasswd',
      '%2Fetc%2Fpasswd',
      'photos.zip%00.txt',
      'a/../../etc/passwd',
    ])
      expect((await download(ref, app.apiKey)).status, ref).toBe(404);
    expect((await ask({ purpose: 'DOWNLOAD', resourceRef: 'photos.zip\0' })).status).toBe(400);

    // An upload granted into a linked folder is refused, and nothing lands outside.
    const upload = await ask({ purpose: 'UPLOAD', resourceRef: 'out/planted.txt' });
    const put = await fetch(upload.body.url, { method: 'PUT', body: 'planted' });
    expect([put.status, ((await put.json()) as { code: string }).code]).toEqual([403, 'FORBIDDEN']);
    const nested = await ask({ purpose: 'UPLOAD', resourceRef: 'out/deeper/planted.txt' });
    expect((await fetch(nested.body.url, { method: 'PUT', body: 'planted' })).status).toBe(403);
    expect([existsSync(join(outside, 'planted.txt')), existsSync(join(outside, 'deeper'))]).toEqual([
      false,
      false,
    ]);
  });
});
