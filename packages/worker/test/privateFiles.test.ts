/**
 * The worker's files are its user's alone (issue 38): its SQLite (execution tokens, every tenant's inputs)
 * and its -wal/-shm files are 0600, the attempts' work directories 0700 — whatever the umask, and also when
 * they exist from before this rule.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import Database from 'better-sqlite3';
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { defineCapability, LocalStore, WorkerClient, WorkerRuntime } from '../src/index.ts';
import { startCommand } from './fixtures/commands.ts';

const directory = mkdtempSync(join(tmpdir(), 'tdp-private-files-test-'));
const modeOf = (path: string) => statSync(path).mode & 0o777;
const workRoot = join(directory, 'work');
let umask = 0;
let h: Harness;

beforeAll(async () => {
  // The loosest umask: every mode below is the one the worker asked for, not one the umask trimmed.
  umask = process.umask(0);
  h = await startHarness({ runLoops: true });
});
afterAll(async () => {
  process.umask(umask);
  await h?.close();
});

it('creates the local database and its -wal and -shm files 0600', () => {
  const path = join(directory, 'new.db');
  const store = new LocalStore(path, newId);
  try {
    store.receive(newId(), startCommand());
    for (const file of [path, `${path}-wal`, `${path}-shm`]) {
      expect(existsSync(file), file).toBe(true);
      expect(modeOf(file).toString(8), file).toBe('600');
    }
  } finally {
    store.close();
  }
});

it('tightens a database left world-readable by an earlier worker when it opens it', () => {
  const path = join(directory, 'old.db');
  const old = new Database(path);
  old.pragma('journal_mode = WAL');
  old.exec('CREATE TABLE t (x)');
  old.close();
  chmodSync(path, 0o644);
  const store = new LocalStore(path, newId);
  try {
    store.receive(newId(), startCommand());
    for (const file of [path, `${path}-wal`, `${path}-shm`])
      expect(modeOf(file).toString(8), file).toBe('600');
  } finally {
    store.close();
  }
});

/** What the probe capability saw of its work directory and of the folder of all of them. */
const seen: { directory: number; root: number }[] = [];
const probe = defineCapability({
  name: 'test.private-files',
  version: '1',
  input: Type.Object({}),
  output: Type.Object({}),
  run: async (ctx) => {
    seen.push({ directory: modeOf(ctx.workDirectory), root: modeOf(workRoot) });
    return {};
  },
});
/** What the folder of all attempts held while an attempt that never asks for its folder ran. */
const whileFileless: string[][] = [];
const fileless = defineCapability({
  name: 'test.no-files',
  version: '1',
  input: Type.Object({}),
  output: Type.Object({}),
  run: async () => {
    whileFileless.push(readdirSync(workRoot));
    return {};
  },
});

/** Runs one task of a one-step workflow on `capability`, on a worker that has both capabilities above. */
async function runOnce(capability: string, settled: () => boolean): Promise<void> {
  const app = await h.createApplication();
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: { name: 'private', version: '1', steps: [{ key: 'only', capability, capabilityVersion: '1' }] },
  });
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName: 'private', workflowVersion: '1', name: 'private', input: {} },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  await expect.poll(settled, { timeout: 15_000 }).toBe(true);
  // The attempt's folder goes with the attempt.
  await expect.poll(() => readdirSync(workRoot), { timeout: 5_000 }).toEqual([]);
}

describe('attempt directories', () => {
  let stopWorker = async () => {};
  beforeAll(async () => {
    // Left loose by an earlier worker: the runtime's start tightens it.
    mkdirSync(workRoot, { mode: 0o755 });
    const workerKey = (
      await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
    ).body.key;
    const client = new WorkerClient(h.url, workerKey, 5_000);
    const store = new LocalStore(join(directory, 'attempts.db'), newId);
    const runtime = new WorkerRuntime({
      client,
      store,
      capabilities: [probe, fileless],
      workDirectory: workRoot,
    });
    await runtime.start();
    stopWorker = async () => {
      await runtime.stop();
      await client.close();
      store.close();
    };
  });
  afterAll(() => stopWorker());

  it("runs each attempt in a 0700 directory, in a 0700 folder (an existing one's mode is tightened)", async () => {
    await runOnce('test.private-files', () => seen.length === 1);
    expect(seen[0]).toEqual({ directory: 0o700, root: 0o700 });
  });

  it('makes no directory for an attempt that never asks for one', async () => {
    await runOnce('test.no-files', () => whileFileless.length === 1);
    expect(whileFileless[0]).toEqual([]);
  });
});
