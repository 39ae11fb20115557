/**
 * `archive.clean` end to end: a TDP server, an application with a resource provider and file store
 * (test/fileStore.ts), and the real worker process. The bytes go between the worker and the store only.
 */
import { mkdtempSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FileStore, startFileStore } from '../../../test/fileStore.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import {
  killAllWorkerProcesses,
  startWorkerProcess,
  stopWorkerProcess,
  type WorkerProcess,
} from './support.ts';
import { readZip, writeZip } from './zips.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let store: FileStore;
let worker: WorkerProcess;
const directory = mkdtempSync(join(tmpdir(), 'tdp-clean-e2e-'));

beforeAll(async () => {
  store = await startFileStore();
  h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
  app = await h.createApplication();
  await h.request('PUT', `/admin/v1/applications/${app.applicationId}/resource-provider`, {
    token: h.adminToken,
    body: { url: store.providerUrl, bearerToken: store.token },
  });
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
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
  worker = await startWorkerProcess(h.url, workerKey, join(directory, 'worker.db'), 'node-clean');
});
afterAll(async () => {
  await stopWorkerProcess(worker);
  killAllWorkerProcesses();
  await h.close();
  await store.close();
});

const run = async (source: string) => {
  const taskId = (
    await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: 'clean', workflowVersion: '1', name: 'clean', input: { source } },
    })
  ).body.task.id as string;
  const view = async () => (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
  await expect
    .poll(async () => (await view()).task.lifecycleStatus, { timeout: 20_000 })
    .toMatch(/SUCCEEDED|FAILED/);
  return view();
};

describe('archive.clean on the worker', () => {
  it('downloads the source through a grant, uploads the cleaned ZIP as a new artifact, and reports the removals', async () => {
    const path = join(directory, 'source.zip');
    await writeZip(path, {
      'photos/a.jpg': Buffer.alloc(2_000, 1),
      'photos/.DS_Store': 'junk',
      '__MACOSX/photos/._a.jpg': 'fork',
      'notes.txt': 'keep me',
    });
    store.files.set('src-1', await readFile(path));
    const done = await run('src-1');
    expect(done.task.lifecycleStatus).toBe('SUCCEEDED');
    const output = done.execution.steps[0].data as {
      archive: string;
      removed: { path: string }[];
      keptFiles: number;
    };
    expect(output.keptFiles).toBe(2);
    expect(output.removed.map((r) => r.path).sort()).toEqual(['__MACOSX/photos/._a.jpg', 'photos/.DS_Store']);
    const cleaned = store.files.get(output.archive);
    expect(cleaned).toBeDefined();
    const written = join(directory, 'cleaned.zip');
    await writeFile(written, cleaned!);
    expect([...(await readZip(written)).keys()].sort()).toEqual(['notes.txt', 'photos/a.jpg']);
    // Two grants: the download of the source and the allocation of the output.
    const purposes = store.grantRequests.map((g) => g.purpose);
    expect(purposes).toEqual(expect.arrayContaining(['DOWNLOAD', 'ARTIFACT']));
  });

  it('a file that is not a ZIP fails the task with a readable, non-retryable error and uploads nothing', async () => {
    store.files.set('broken-1', Buffer.from('this is not a zip file'));
    const before = store.files.size;
    const done = await run('broken-1');
    expect(done.task.lifecycleStatus).toBe('FAILED');
    expect(done.task.failure).toMatchObject({ code: 'ARCHIVE_INVALID' });
    expect(done.execution.steps[0].error).toMatchObject({ code: 'ARCHIVE_INVALID', retryable: false });
    expect(store.files.size).toBe(before);
  });
});
