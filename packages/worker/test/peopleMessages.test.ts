/**
 * Messages for people through a real task: the worker's grant request is refused with a 409
 * (RESOURCE_PROVIDER_NOT_CONFIGURED: the application has no resource provider). The person sees a
 * sentence saying what failed and what to do — in the API, the callback and the task's failure — and
 * never TDP's internal request or its problem+json; that goes to the failure's stored `detail`.
 */
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinCapabilities } from '@tdp/capabilities';
import { failureSentence, unfitForPeople } from '@tdp/protocol';
import { connectDatabase } from '@tdp/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { type RunningWorker, silentLogger, startWorker } from '../src/index.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let worker: RunningWorker;
let receiver: Server;
let receiverUrl: string;
const callbacks: { type: string; data: { failure: { code: string; userMessage: string | null } | null } }[] =
  [];
const directory = mkdtempSync(join(tmpdir(), 'tdp-people-messages-'));

beforeAll(async () => {
  h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
  app = await h.createApplication();
  receiver = createServer(async (request, response) => {
    let body = '';
    for await (const chunk of request) body += chunk;
    callbacks.push(JSON.parse(body));
    response.writeHead(204).end();
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const address = receiver.address() as { port: number };
  receiverUrl = `http://127.0.0.1:${address.port}/callbacks`;
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
  worker = await startWorker({
    url: h.url,
    key: workerKey,
    capabilities: builtinCapabilities,
    database: join(directory, 'worker.db'),
    handleSignals: false,
    logger: silentLogger,
  });
});

afterAll(async () => {
  await worker?.drain();
  await new Promise((resolve) => receiver?.close(resolve));
  await h?.close();
});

describe('a task that fails on a grant refused with 409', () => {
  it('tells the person what failed and what to do; the technical answer is kept in detail only', async () => {
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'grant-409' },
      body: {
        workflowName: 'clean',
        workflowVersion: '1',
        name: 'Holiday photos',
        input: { source: 'photos.zip' },
        callbackUrl: receiverUrl,
      },
    });
    expect(created.status).toBe(201);
    const taskId = created.body.task.id as string;
    let view: any;
    const deadline = Date.now() + 20_000;
    do {
      await new Promise((resolve) => setTimeout(resolve, 100));
      view = (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
    } while (view.task.lifecycleStatus !== 'FAILED' && Date.now() < deadline);

    const sentence = failureSentence('RESOURCE_PROVIDER_NOT_CONFIGURED');
    expect(view.task.failure).toMatchObject({
      code: 'RESOURCE_PROVIDER_NOT_CONFIGURED',
      userMessage: sentence,
    });
    expect(view.execution.steps[0].error).toMatchObject({
      code: 'RESOURCE_PROVIDER_NOT_CONFIGURED',
      userMessage: sentence,
    });
    expect(view.execution.steps[0].error).not.toHaveProperty('detail');
    for (const shown of [view.task.failure.userMessage, view.execution.steps[0].error.userMessage]) {
      expect(unfitForPeople(shown)).toBeNull();
      for (const internal of ['{', 'urn:', '/v1/', '409']) expect(shown).not.toContain(internal);
    }

    // The task's events say the same, without the detail.
    const events = await h.request('GET', `/v1/tasks/${taskId}/events`, { token: app.apiKey });
    const failedEvent = events.body.items.find((e: { eventType: string }) => e.eventType === 'STEP_FAILED');
    expect(failedEvent.payload.error).toMatchObject({ userMessage: sentence });
    expect(failedEvent.payload.error).not.toHaveProperty('detail');

    // The callback says the same.
    const callbackDeadline = Date.now() + 20_000;
    while (!callbacks.some((c) => c.type === 'execution.failed') && Date.now() < callbackDeadline)
      await new Promise((resolve) => setTimeout(resolve, 100));
    const failed = callbacks.find((c) => c.type === 'execution.failed');
    expect(failed?.data.failure).toEqual({ code: 'RESOURCE_PROVIDER_NOT_CONFIGURED', userMessage: sentence });

    // Operators see the same sentence on the dashboard, with the technical detail beside it.
    const login = await h.request('POST', '/dashboard/api/login', { body: { token: h.adminToken } });
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
    const board = await h.request('GET', `/dashboard/api/tasks/${taskId}`, { headers: { cookie } });
    expect(board.body.task.failure).toMatchObject({
      userMessage: sentence,
      detail: expect.stringMatching(/409/),
    });
    expect(board.body.execution.steps[0].error).toMatchObject({
      userMessage: sentence,
      detail: expect.stringMatching(/grant request refused \(409 RESOURCE_PROVIDER_NOT_CONFIGURED\)/),
    });
    const list = await h.request('GET', '/dashboard/api/tasks', { headers: { cookie } });
    expect(list.body.items.find((t: { id: string }) => t.id === taskId).failure.userMessage).toBe(sentence);

    // What went wrong technically is stored with the failure, for developers and operators.
    const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
    try {
      const [step] = await sql<
        { error: { detail?: string } }[]
      >`SELECT error FROM step WHERE task_id = ${taskId}`;
      expect(step!.error.detail).toMatch(/409 RESOURCE_PROVIDER_NOT_CONFIGURED/);
      const [task] = await sql<
        { failure: { detail?: string } }[]
      >`SELECT failure FROM task WHERE id = ${taskId}`;
      expect(task!.failure.detail).toMatch(/RESOURCE_PROVIDER_NOT_CONFIGURED/);
    } finally {
      await sql.end();
    }
  });
});
