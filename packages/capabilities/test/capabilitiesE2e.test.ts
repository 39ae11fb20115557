/**
 * The built-in capabilities end to end (`archive.clean`, then `image.watermark` on its output): a TDP server, an application with a resource provider and file store
 * (test/fileStore.ts), and the real worker process. The bytes go between the worker and the store only.
 */
import { mkdtempSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import iconv from 'iconv-lite';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FileStore, startFileStore } from '../../../test/fileStore.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import {
  killAllWorkerProcesses,
  startWorkerProcess,
  stopWorkerProcess,
  type WorkerProcess,
} from '../../worker/test/support.ts';
import { bombPng } from './images.ts';
import { readZip, writeRawZip, writeZip } from './zips.ts';

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
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'clean-watermark',
      version: '1',
      steps: [
        {
          key: 'clean',
          capability: 'archive.clean',
          capabilityVersion: '1',
          inputMapping: { source: '$.input.source' },
        },
        {
          key: 'watermark',
          capability: 'image.watermark',
          capabilityVersion: '1',
          dependsOn: ['clean'],
          inputMapping: { source: '$.steps.clean.output.archive', text: '$.input.text' },
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

const run = async (source: string, workflowName = 'clean', extra: Record<string, unknown> = {}) => {
  const taskId = (
    await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName, workflowVersion: '1', name: workflowName, input: { source, ...extra } },
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

  it('clean, then watermark: the junk is gone and the images carry the watermark, Chinese included', async () => {
    const image = await sharp({
      create: { width: 480, height: 320, channels: 3, background: { r: 30, g: 30, b: 30 } },
    })
      .jpeg()
      .toBuffer();
    const path = join(directory, 'album.zip');
    await writeZip(path, {
      'album/one.jpg': image,
      'album/._one.jpg': 'fork',
      'album/Thumbs.db': 'junk',
      'readme.txt': 'hello',
    });
    store.files.set('album-1', await readFile(path));
    const done = await run('album-1', 'clean-watermark', { text: '机密 Confidential' });
    expect(done.task.lifecycleStatus).toBe('SUCCEEDED');
    const watermark = done.execution.steps.find((s: { key: string }) => s.key === 'watermark').data as {
      archive: string;
      watermarked: number;
      skipped: number;
    };
    expect([watermark.watermarked, watermark.skipped]).toEqual([1, 1]);
    const final = join(directory, 'final.zip');
    await writeFile(final, store.files.get(watermark.archive)!);
    const entries = await readZip(final);
    expect([...entries.keys()].sort()).toEqual(['album/one.jpg', 'readme.txt']);
    const before = await sharp(image).raw().toBuffer();
    const after = await sharp(entries.get('album/one.jpg')!).raw().toBuffer();
    expect(after.length).toBe(before.length);
    let differing = 0;
    for (let i = 0; i < before.length; i += 1) if (Math.abs(before[i]! - after[i]!) > 24) differing += 1;
    expect(differing).toBeGreaterThan(1_000);
  });

  it('a ZIP from Chinese Windows (GBK names, no UTF-8 flag) with a decompression bomb: the names come out right, the bomb is refused in the step result, the photo watermarked, the worker alive', async () => {
    const photo = await sharp({
      create: { width: 320, height: 240, channels: 3, background: { r: 40, g: 40, b: 40 } },
    })
      .jpeg()
      .toBuffer();
    const path = join(directory, 'gbk.zip');
    await writeRawZip(path, [
      { name: iconv.encode('照片/家庭.jpg', 'gbk'), data: photo },
      { name: iconv.encode('照片/炸弹.png', 'gbk'), data: bombPng(100_000, 100_000) },
      { name: iconv.encode('照片/Thumbs.db', 'gbk'), data: Buffer.from('junk') },
    ]);
    store.files.set('gbk-1', await readFile(path));
    const done = await run('gbk-1', 'clean-watermark', { text: '机密' });
    expect(done.task.lifecycleStatus).toBe('SUCCEEDED');
    const step = (key: string) => done.execution.steps.find((s: { key: string }) => s.key === key).data;
    expect(step('clean')).toMatchObject({
      nameEncoding: 'gb18030',
      removed: [{ path: '照片/Thumbs.db', reason: 'Thumbs.db' }],
    });
    const watermark = step('watermark') as { archive: string; files: unknown[] };
    expect(watermark.files).toEqual([
      { path: '照片/家庭.jpg', status: 'WATERMARKED', format: 'jpeg' },
      {
        path: '照片/炸弹.png',
        status: 'FAILED',
        reason: 'TOO_LARGE',
        message: 'declares 100000 × 100000 pixels (10000 megapixels); the limit is 50 megapixels',
      },
    ]);
    const final = join(directory, 'gbk-final.zip');
    await writeFile(final, store.files.get(watermark.archive)!);
    expect([...(await readZip(final)).keys()]).toEqual(['照片/家庭.jpg', '照片/炸弹.png']);
    expect(worker.child.exitCode).toBeNull();
  });
});
