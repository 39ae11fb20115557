/**
 * Grants renewed during a long step: a real server, a real worker runtime, and a file
 * store whose URLs last 3 s and refuse anything after (test/fileStore.ts). A step that allocates its
 * output, works longer than that and then uploads succeeds on a renewed URL; a download that breaks
 * off after the URL expired resumes where it stopped on a renewed one.
 */
import { mkdtempSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FileStore, startFileStore } from '../../../test/fileStore.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { defineCapability, LocalStore, WorkerClient, WorkerRuntime } from '../src/index.ts';

const grantTtlMs = 3_000;
let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let files: FileStore;
let client: WorkerClient;
let runtime: WorkerRuntime;
const directory = mkdtempSync(join(tmpdir(), 'tdp-grant-renewal-'));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Allocates its output first, works for longer than a URL lasts, then writes and uploads it. */
const slowWriter = defineCapability({
  name: 'renewal.slow-writer',
  version: '1',
  input: Type.Object({}),
  output: Type.Object({ result: Type.String() }),
  async run(ctx) {
    const output = await ctx.allocateOutput({
      relativePath: 'out/result.txt',
      mediaType: 'text/plain',
      maxBytes: 1_000,
    });
    await sleep(grantTtlMs * 1.5);
    await writeFile(output.path, 'worked long');
    return { result: (await output.upload()).resourceRef };
  },
});

/** Downloads its input (the store breaks the first download off after the URL expired) and echoes it. */
const reader = defineCapability({
  name: 'renewal.reader',
  version: '1',
  input: Type.Object({ source: Type.String() }),
  output: Type.Object({ text: Type.String() }),
  async run(ctx, input) {
    return { text: await readFile(await ctx.download(input.source), 'utf8') };
  },
});

beforeAll(async () => {
  files = await startFileStore({
    grantTtlMs,
    breakFirstDownload: { afterBytes: 10, stallMs: grantTtlMs * 1.5 },
  });
  h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
  app = await h.createApplication();
  await h.request('PUT', `/admin/v1/applications/${app.applicationId}/resource-provider`, {
    token: h.adminToken,
    body: { url: files.providerUrl, bearerToken: files.token },
  });
  for (const [name, capability, inputMapping] of [
    ['slow-writer', slowWriter.name, {}],
    ['reader', reader.name, { source: '$.input.source' }],
  ] as const)
    await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: {
        name,
        version: '1',
        steps: [{ key: 'only', capability, capabilityVersion: '1', inputMapping }],
      },
    });
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  client = new WorkerClient(h.url, workerKey);
  runtime = new WorkerRuntime({
    client,
    store: new LocalStore(join(directory, 'worker.db'), newId),
    capabilities: [slowWriter, reader],
    nodeId: 'node-renewal',
    workDirectory: join(directory, 'work'),
    // The test storage listens on 127.0.0.1, which the egress policy refuses unless allowed.
    egressAllow: ['127.0.0.0/8'],
    // The defaults (25% or 60 s left): a 3 s grant is renewed at half its life.
  });
  await runtime.start();
});
afterAll(async () => {
  await runtime?.stop();
  await client?.close();
  await h?.close();
  await files?.close();
});

async function run(workflowName: string, input: Record<string, unknown> = {}) {
  const taskId = (
    await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName, workflowVersion: '1', name: workflowName, input },
    })
  ).body.task.id as string;
  const view = async () => (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
  await expect
    .poll(async () => (await view()).task.lifecycleStatus, { timeout: 30_000 })
    .toMatch(/SUCCEEDED|FAILED/);
  return view();
}

describe('grants renewed while the step needs them', () => {
  it('an output allocated before a long piece of work is uploaded on a renewed URL, to the same allocation', async () => {
    const asked = files.grantRequests.length;
    const done = await run('slow-writer');
    expect(done.execution.steps[0].error ?? null).toBeNull();
    expect(done.task.lifecycleStatus).toBe('SUCCEEDED');
    const result = done.execution.steps[0].data.result as string;
    expect(files.files.get(result)?.toString()).toBe('worked long');
    const asks = files.grantRequests.slice(asked);
    // Allocated once, renewed at least once (the work took 1.5 lifetimes), all under one key.
    expect(asks[0]).toMatchObject({ purpose: 'ARTIFACT', renewal: false });
    expect(asks.slice(1).length).toBeGreaterThanOrEqual(1);
    for (const ask of asks.slice(1))
      expect(ask).toMatchObject({ renewal: true, idempotencyKey: asks[0]!.idempotencyKey });
    const put = files.transfers.filter((t) => t.method === 'PUT' && t.path.startsWith(`/files/${result}`));
    expect(put.map((t) => t.status)).toEqual([200]);
  }, 40_000);

  it('a download broken off after its URL expired resumes where it stopped, on a renewed URL', async () => {
    files.files.set('in-1', Buffer.from('0123456789abcdefghij'));
    const done = await run('reader', { source: 'in-1' });
    expect(done.execution.steps[0].error ?? null).toBeNull();
    expect(done.task.lifecycleStatus).toBe('SUCCEEDED');
    expect(done.execution.steps[0].data.text).toBe('0123456789abcdefghij');
    const gets = files.transfers.filter((t) => t.method === 'GET' && t.path.startsWith('/files/in-1'));
    expect(gets.map((t) => [t.range, t.status])).toEqual([
      [undefined, 200],
      ['bytes=10-', 206],
    ]);
    // The resumed request went to the renewed URL, not the first one.
    expect(gets[1]!.path).not.toBe(gets[0]!.path);
  }, 40_000);
});
