/**
 * A child task across a server restart: `tdp server` as a real process is SIGKILLed while the child's
 * step runs on a worker, then started again on the same database. The parent still waits for that child
 * and no other. The worker finishes, and the parent continues with the child's output. No second child
 * is started.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { type TdpProcess, tdpProcess } from '../../../test/tdpProcess.ts';
import { attemptEvent, completeWith, type StartCommand, startTestWorker } from '../../../test/testWorker.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';
import { connectDatabase } from '../src/main.ts';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: ReturnType<typeof connectDatabase>;
let tdp: TdpProcess;
let apiKey: string;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
/** The child's step has reported STEP_STARTED and heard the answer (the kill comes after it). */
let startedReported = false;
let release!: () => void;
const released = new Promise<void>((resolve) => {
  release = resolve;
});

/** A request as the application (a body goes with a fresh Idempotency-Key). */
const call = (method: string, path: string, body?: unknown) =>
  tdp.request(method, path, {
    token: apiKey,
    ...(body === undefined ? {} : { body, headers: { 'idempotency-key': newId() } }),
  });

/** The child's step reports STEP_STARTED, then waits for the test before it completes. */
const handler = async (
  command: StartCommand,
  report: (events: Record<string, unknown>[]) => Promise<any>,
) => {
  if (command.capability === 'restart.after')
    return completeWith({ got: command.input.fromChild })(command, report);
  await report([attemptEvent(command, 'STEP_STARTED', 1)]);
  startedReported = true;
  await released;
  // As a real worker's outbox does: the same event again until the restarted server takes it (the first
  // request may meet a connection the killed process left behind).
  const completed = attemptEvent(command, 'STEP_COMPLETED', 2, { output: { echoed: command.input.text } });
  for (;;) {
    try {
      return await report([completed]);
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
};

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase({ url: database.url, maxConnections: 2 });
  // The test worker beats only when asked: a long session TTL keeps it alive across a slow restart.
  tdp = tdpProcess({
    databaseUrl: database.url,
    port: await freePort(),
    env: { TDP_WORKER_HEARTBEAT_TTL_MS: '600000' },
  });
  await tdp.start();
  apiKey = await tdp.createApplication('child-restart');
  const workerKey = (await tdp.request('POST', '/admin/v1/worker-credentials', { body: {} })).body.key;
  for (const definition of [
    {
      name: 'restart-child',
      version: '1',
      steps: [
        {
          key: 'echo',
          capability: 'restart.echo',
          capabilityVersion: '1',
          inputMapping: { text: '$.input.text' },
        },
      ],
    },
    {
      name: 'restart-parent',
      version: '1',
      steps: [
        {
          key: 'sub',
          kind: 'task',
          task: {
            workflowName: 'restart-child',
            workflowVersion: '1',
            inputMapping: { text: '$.input.text' },
          },
        },
        {
          key: 'after',
          capability: 'restart.after',
          capabilityVersion: '1',
          dependsOn: ['sub'],
          inputMapping: { fromChild: '$.steps.sub.output.echo.echoed' },
        },
      ],
    },
  ]) {
    const published = await call('POST', '/v1/workflow-definitions', definition);
    expect(published.status, JSON.stringify(published.body)).toBe(201);
  }
  worker = await startTestWorker({
    baseUrl: tdp.url,
    workerKey,
    nodeId: 'node-child-restart',
    capabilities: ['restart.echo', 'restart.after'].map((name) => ({ name, version: '1' })),
    handler,
  });
}, 120_000);
afterAll(async () => {
  release();
  await worker?.stop().catch(() => {});
  await tdp?.kill();
  await sql?.end();
  await database?.drop();
});

const patience = { timeout: 30_000, interval: 100 };
const view = async (taskId: string) => (await call('GET', `/v1/tasks/${taskId}`)).body;
const children = async (taskId: string) =>
  (await sql`SELECT id FROM task WHERE parent_task_id = ${taskId}`).map((r) => r.id as string);

describe('a child task across a restart', () => {
  it('loses nothing when the server is SIGKILLed while the child runs', async () => {
    const created = await call('POST', '/v1/tasks', {
      workflowName: 'restart-parent',
      workflowVersion: '1',
      name: 'survives a restart',
      input: { text: 'still here' },
    });
    expect(created.status).toBe(201);
    const parentId = created.body.task.id as string;
    await expect.poll(async () => (await children(parentId)).length, patience).toBe(1);
    const [childId] = await children(parentId);
    await expect.poll(() => worker.received.some((c) => c.taskId === childId), patience).toBe(true);
    await expect.poll(() => startedReported, patience).toBe(true);

    await tdp.kill('SIGKILL');
    await tdp.start();
    await worker.reconnect();
    await worker.heartbeat();

    const waiting = (await view(parentId)).execution.steps.find((s: any) => s.key === 'sub');
    expect(waiting).toMatchObject({ status: 'RUNNING', waitingFor: { kind: 'task', childTaskId: childId } });
    release();
    await expect.poll(async () => (await view(parentId)).task.lifecycleStatus, patience).toBe('SUCCEEDED');
    const parent = await view(parentId);
    expect(parent.execution.steps.find((s: any) => s.key === 'after').data).toEqual({ got: 'still here' });
    expect((await view(childId!)).task).toMatchObject({
      lifecycleStatus: 'SUCCEEDED',
      parentTaskId: parentId,
    });
    expect(await children(parentId)).toEqual([childId]);
  }, 120_000);
});
