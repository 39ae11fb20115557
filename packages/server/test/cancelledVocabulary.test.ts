/**
 * One spelling of cancelled (issue 40, trap 9): a cancel reads CANCELLED on the task, its execution and the
 * running step it stopped — in REST and in the callback body — and the old spelling a client or a worker
 * still sends (CANCELED) is read as CANCELLED during its deprecation period.
 */
import { createServer, type Server } from 'node:http';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { attemptEvent, startTestWorker } from '../../../test/testWorker.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
let receiver: Server;
let receiverUrl: string;
const callbacks: { type: string; status: string; data: { lifecycleStatus: string } }[] = [];

beforeAll(async () => {
  h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
  app = await h.createApplication();
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'cancel-wf',
      version: '1',
      steps: [{ key: 'long', capability: 'long.op', capabilityVersion: '1', retry: { maxAttempts: 1 } }],
    },
  });
  expect(published.status).toBeLessThan(300);
  receiver = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => {
      callbacks.push(JSON.parse(raw));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const address = receiver.address();
  receiverUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/callback`;
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => receiver.close(resolve));
});

const taskOf = async (id: string) => (await h.request('GET', `/v1/tasks/${id}`, { token: app.apiKey })).body;

describe('a cancelled task', () => {
  it('reads CANCELLED on the task, the execution and the running step it stopped, in REST and in its callbacks', async () => {
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-long',
      capabilities: [{ name: 'long.op', version: '1' }],
      handler: async (command, report) => {
        await report([attemptEvent(command, 'STEP_STARTED', 1)]);
      },
      // An older worker reports the stop with the old spelling of the code: still read as a cancel.
      onCommand: (command) => {
        if (command.type !== 'CANCEL_ATTEMPT') return;
        const started = worker.received.find((c) => c.attemptId === command.attemptId)!;
        void worker.report([
          attemptEvent(started, 'STEP_FAILED', 2, {
            error: { category: 'CANCELLED', code: 'CANCELED', retryable: false },
          }),
        ]);
      },
    });
    try {
      const created = await h.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': newId() },
        body: {
          workflowName: 'cancel-wf',
          workflowVersion: '1',
          name: 'to cancel',
          callbackUrl: receiverUrl,
        },
      });
      const taskId = created.body.task.id as string;
      const step = async () => (await taskOf(taskId)).execution.steps[0] as { status: string; error?: any };
      await expect.poll(async () => (await step()).status, { timeout: 10_000 }).toBe('RUNNING');

      const cancelling = await h.request('POST', `/v1/tasks/${taskId}:cancel`, {
        token: app.apiKey,
        body: { reason: 'customer asked' },
      });
      expect(cancelling.body.execution.status).toBe('CANCELLING');

      await expect
        .poll(async () => (await taskOf(taskId)).execution.status, { timeout: 10_000 })
        .toBe('CANCELLED');
      const task = await taskOf(taskId);
      expect(task.task.lifecycleStatus).toBe('CANCELLED');
      // The step the worker stopped was cancelled, not failed; what the worker said is its reason.
      expect(task.execution.steps[0]).toMatchObject({
        status: 'CANCELLED',
        error: { category: 'CANCELLED' },
      });

      await expect
        .poll(() => callbacks.map((c) => c.type), { timeout: 10_000 })
        .toEqual(expect.arrayContaining(['execution.cancelling', 'execution.cancelled']));
      const last = callbacks.find((c) => c.type === 'execution.cancelled')!;
      expect(last).toMatchObject({ status: 'CANCELLED', data: { lifecycleStatus: 'CANCELLED' } });
      expect(callbacks.find((c) => c.type === 'execution.cancelling')).toMatchObject({
        status: 'CANCELLING',
      });
      expect(JSON.stringify(callbacks)).not.toContain('CANCELED');

      // A filter in the old spelling is still read as CANCELLED (deprecated), the new one too.
      for (const status of ['CANCELED', 'CANCELLED']) {
        const listed = await h.request('GET', `/v1/tasks?status=${status}`, { token: app.apiKey });
        expect(listed.status).toBe(200);
        expect(listed.body.items.map((t: { task: { id: string } }) => t.task.id)).toContain(taskId);
      }
      const unknown = await h.request('GET', '/v1/tasks?status=CANCELD', { token: app.apiKey });
      expect(unknown.status).toBe(400);
    } finally {
      await worker.stop();
    }
  });
});
