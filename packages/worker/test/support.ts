import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { newId } from '@tdp/protocol';
import { expect } from 'vitest';
import type { Harness } from '../../../test/harness.ts';

const children = new Set<ChildProcess>();

export interface WorkerProcess {
  child: ChildProcess;
  exited: Promise<number | null>;
  workerId: string;
}

/** The runtime in its own process (runtimeProcess.ts), on its own SQLite file; resolves once registered. */
export async function startWorkerProcess(
  baseUrl: string,
  workerKey: string,
  dbPath: string,
  nodeId: string,
): Promise<WorkerProcess> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@tdp/source',
      '--import',
      'tsx',
      fileURLToPath(new URL('./runtimeProcess.ts', import.meta.url)),
      baseUrl,
      workerKey,
      dbPath,
      nodeId,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  children.add(child);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      children.delete(child);
      resolve(code);
    }),
  );
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error('the worker process ended before registering');
  return { child, exited, workerId: JSON.parse(first.value).workerId as string };
}

/** SIGTERM: the session drains, so the server stops placing steps on it (a killed one keeps them till its TTL). */
export async function stopWorkerProcess(worker: WorkerProcess): Promise<void> {
  worker.child.kill('SIGTERM');
  await worker.exited;
}

export function killAllWorkerProcesses(): void {
  for (const child of children) child.kill('SIGKILL');
}

/**
 * A program that starts the worker with `startWorker` (as `tdp worker` does) and nothing else, so it
 * ends when the worker lets go of it (a server DRAIN). Its one capability, `test.slow`@1, takes `slowMs`.
 */
const startWorkerProgram = (slowMs: number) => `
  import { defineCapability, silentLogger, startWorker } from '@tdp/worker';
  import { Type } from 'typebox';
  const slow = defineCapability({
    name: 'test.slow', version: '1', input: Type.Object({}), output: Type.Object({ slept: Type.Boolean() }),
    run: async () => { await new Promise((resolve) => setTimeout(resolve, ${slowMs})); return { slept: true }; },
  });
  const worker = await startWorker({ url: process.env.TDP_URL, key: process.env.KEY, capabilities: [slow],
    database: process.env.DB, nodeId: process.env.NODE_ID, healthPort: 0, logger: silentLogger });
  process.stdout.write(JSON.stringify({ workerId: worker.id }) + '\\n');
`;

/** `startWorkerProgram` in its own process; resolves once registered, with how it exited later. */
export async function startWorkerProgramProcess(options: {
  baseUrl: string;
  workerKey: string;
  dbPath: string;
  nodeId: string;
  slowMs: number;
}): Promise<{
  child: ChildProcess;
  workerId: string;
  exited: Promise<{ code: number | null; signal: string | null }>;
}> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@tdp/source',
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      startWorkerProgram(options.slowMs),
    ],
    {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      env: {
        ...process.env,
        TDP_URL: options.baseUrl,
        KEY: options.workerKey,
        DB: options.dbPath,
        NODE_ID: options.nodeId,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  children.add(child);
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    }),
  );
  const workerId = await new Promise<string>((resolve, reject) => {
    child.stdout!.once('data', (line: Buffer) => resolve(JSON.parse(line.toString()).workerId));
    child.once('exit', () => reject(new Error('the worker ended before registering')));
  });
  return { child, workerId, exited };
}

/** Submits a task of `workflowName`@1 for the application of `apiKey` (a fresh idempotency key); its id. */
export async function submitTask(
  h: Harness,
  apiKey: string,
  workflowName: string,
  input: Record<string, unknown>,
): Promise<string> {
  const created = await h.request('POST', '/v1/tasks', {
    token: apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName, workflowVersion: '1', name: workflowName, input },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.task.id as string;
}

/** `GET /v1/tasks/{id}`: the task and its execution. */
export async function taskView(h: Harness, apiKey: string, taskId: string) {
  return (await h.request('GET', `/v1/tasks/${taskId}`, { token: apiKey })).body;
}

/** The task's view once it has ended (SUCCEEDED, FAILED or CANCELLED), waiting up to `timeoutMs`. */
export async function endedTask(h: Harness, apiKey: string, taskId: string, timeoutMs = 30_000) {
  await expect
    .poll(async () => (await taskView(h, apiKey, taskId)).task.lifecycleStatus, {
      timeout: timeoutMs,
      interval: 100,
    })
    .toMatch(/^(SUCCEEDED|FAILED|CANCELLED)$/);
  return taskView(h, apiKey, taskId);
}
