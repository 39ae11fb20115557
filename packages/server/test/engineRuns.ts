/**
 * What the Temporal engine's tests do to a harness: an application with the test DAGs and a worker
 * key, tasks submitted and read, the step facts both engines must agree on, and workflow histories kept.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newId } from '@tdp/protocol';
import type { Client } from '@temporalio/client';
import { expect } from 'vitest';
import type { Harness } from '../../../test/harness.ts';
import { attemptEvent, completeWith, type Handler, startTestWorker } from '../../../test/testWorker.ts';
import { connectDatabase } from '../src/main.ts';

/** Each harness's application (its API key) and worker key, once `prepare` made them. */
export const apps = new Map<Harness, { apiKey: string; workerKey: string }>();

/** A step of the test DAGs: capability `engine.op` unless `extra` says otherwise. */
export const step = (key: string, dependsOn: string[] = [], extra: Record<string, unknown> = {}) => ({
  key,
  capability: 'engine.op',
  capabilityVersion: '1',
  dependsOn,
  ...extra,
});

export async function prepare(h: Harness, definitions: Record<string, unknown>[]): Promise<void> {
  const app = await h.createApplication();
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  for (const body of definitions) {
    const published = await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
  }
  apps.set(h, { apiKey: app.apiKey, workerKey });
}

export const submit = (h: Harness, workflowName: string) =>
  h.request('POST', '/v1/tasks', {
    token: apps.get(h)!.apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName, workflowVersion: '1', name: workflowName },
  });

export const task = async (h: Harness, id: string) =>
  (await h.request('GET', `/v1/tasks/${id}`, { token: apps.get(h)!.apiKey })).body;

export const finished = (h: Harness, id: string, timeout = 60_000) =>
  expect.poll(async () => (await task(h, id)).task.lifecycleStatus, { timeout }).toBe('SUCCEEDED');

/** The step facts of a task, in commit order: type, step and attempt (what both engines must agree on). */
export async function stepFacts(h: Harness, id: string): Promise<string[]> {
  const db = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
  try {
    const rows = await db<{ type: string; step_key: string | null; step_attempt: number | null }[]>`
      SELECT type, step_key, step_attempt FROM task_event WHERE task_id = ${id} ORDER BY task_version`;
    return rows
      .filter((r) => r.type !== 'ORCHESTRATION_DECIDED')
      .map((r) => `${r.type}${r.step_key ? ` ${r.step_key}#${r.step_attempt}` : ''}`);
  } finally {
    await db.end();
  }
}

/** A worker offering `engine.op`; one step at a time unless told, so both engines commit the same sequence. */
export const worker = (h: Harness, name: string, handler: Handler, maxConcurrency = 1) =>
  startTestWorker({
    baseUrl: h.url,
    workerKey: apps.get(h)!.workerKey,
    nodeId: name,
    maxConcurrency,
    capabilities: [{ name: 'engine.op', version: '1' }],
    handler,
  });

/** Where the recorded workflow histories are kept; temporalReplay.test.ts replays each on today's code. */
export const historiesDirectory = fileURLToPath(new URL('./fixtures/temporal-histories/', import.meta.url));

/**
 * With TDP_RECORD_TEMPORAL_HISTORIES=1, keeps the closed workflow's history as `<name>.json` for the
 * replay test. Recorded when the workflow's code changes in a way that old histories cannot show (a new
 * path); old files stay, so the code that runs today is checked against what ran before.
 */
export async function recordHistory(client: Client, name: string, workflowId: string): Promise<void> {
  if (!process.env.TDP_RECORD_TEMPORAL_HISTORIES) return;
  const handle = client.workflow.getHandle(workflowId);
  await expect
    .poll(async () => (await handle.describe()).status.name, { timeout: 20_000 })
    .not.toBe('RUNNING');
  await mkdir(historiesDirectory, { recursive: true });
  // The history message's own JSON (protobufjs's toJSON), which the replay reads back with
  // historyFromJSON; the SDK's historyToJSON fails here (its copy of protobufjs is not the protos' one).
  await writeFile(
    join(historiesDirectory, `${name}.json`),
    `${JSON.stringify(await handle.fetchHistory(), null, 1)}\n`,
  );
}

/**
 * A worker whose first attempt starts and is held until `release()` (then completes); every later one
 * completes at once. For a chain, the first attempt is the first step's.
 */
export async function workerHoldingFirst(h: Harness, name: string) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let commands = 0;
  const held = await worker(h, name, async (command, report) => {
    commands += 1;
    if (commands === 1) {
      await report([attemptEvent(command, 'STEP_STARTED', 1)]);
      await released;
      await report([attemptEvent(command, 'STEP_COMPLETED', 2, { output: { ok: true }, durationMs: 5 })]);
      return;
    }
    await completeWith({ ok: true })(command, report);
  });
  return { worker: held, release };
}
