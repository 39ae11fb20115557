/**
 * Running the work end to end: a task is placed on a registered worker through its command stream, the
 * worker reports through the attempt inbox, the DAG advances in the same transactions, and the
 * application receives signed callbacks in sequence.
 */
import { createServer, type Server } from 'node:http';
import { newId, verifySignature } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { completeWith, startTestWorker } from '../../../test/testWorker.ts';
import { PostgresCallbackQueue } from '../src/adapters/outbound/postgres/callbackQueue.ts';
import { sendDueCallbacks } from '../src/core/callbacks/sendCallbacks.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
let receiver: Server;
let receiverUrl: string;
const received: { body: any; raw: string; signature: string | undefined }[] = [];
let failNext = 0;

beforeAll(async () => {
  h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
  app = await h.createApplication();
  workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: { label: 'tests' } })
  ).body.key;
  await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() });
  receiver = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => {
      if (failNext > 0) {
        failNext -= 1;
        res.writeHead(503).end();
        return;
      }
      received.push({
        body: JSON.parse(raw),
        raw,
        signature: req.headers['tdp-signature'] as string | undefined,
      });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const address = receiver.address();
  receiverUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/tdp/callback`;
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => receiver.close(resolve));
});

const submit = (key: string, extra: Record<string, unknown> = {}) =>
  h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': key },
    body: {
      workflowName: 'zip-clean-watermark',
      workflowVersion: '1',
      name: 'Holiday photos',
      externalRef: key,
      input: { sourceZip: 'asset://z1', watermarkText: '© ACME' },
      callbackUrl: receiverUrl,
      ...extra,
    },
  });

/** A test worker offering both steps of the ZIP workflow, each answered by `handler`. */
const startZipWorker = (nodeId: string, handler: Parameters<typeof startTestWorker>[0]['handler']) =>
  startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId,
    capabilities: [
      { name: 'archive.clean', version: '1' },
      { name: 'image.watermark', version: '2' },
    ],
    handler,
  });

const taskStatus = async (id: string) =>
  (await h.request('GET', `/v1/tasks/${id}`, { token: app.apiKey })).body;

describe('running a task', () => {
  it('explains why a ready step has no worker', async () => {
    const created = await submit(`unplaceable-${newId()}`);
    await expect
      .poll(async () => (await taskStatus(created.body.task.id)).execution.steps[0].unschedulableReasons, {
        timeout: 5_000,
      })
      .toEqual(['no worker is registered']);
  });

  it('places steps on a worker, feeds outputs forward, ends the task and calls back in sequence, signed', async () => {
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-1',
      capabilities: [
        { name: 'archive.clean', version: '1' },
        { name: 'image.watermark', version: '2' },
      ],
      handler: async (command, report) => {
        const output =
          command.stepId === 'clean'
            ? { archive: 'asset://cleaned' }
            : { archive: `asset://watermarked(${command.input.archive})` };
        await completeWith(output)(command, report);
      },
    });
    try {
      const created = await submit(`run-${newId()}`);
      const taskId = created.body.task.id;
      await expect
        .poll(async () => (await taskStatus(taskId)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      const final = await taskStatus(taskId);
      expect(final.execution).toMatchObject({ status: 'SUCCEEDED', progress: 100 });
      expect(final.execution.steps.map((s: any) => `${s.key}:${s.status}`)).toEqual([
        'clean:SUCCEEDED',
        'watermark:SUCCEEDED',
      ]);
      const watermark = worker.received.find((c) => c.taskId === taskId && c.stepId === 'watermark')!;
      expect(watermark.input).toEqual({ archive: 'asset://cleaned', text: '© ACME' });

      await expect
        .poll(() => received.filter((r) => r.body.taskId === taskId).at(-1)?.body.type, { timeout: 15_000 })
        .toBe('execution.succeeded');
      const mine = received.filter((r) => r.body.taskId === taskId);
      expect(mine.map((r) => r.body.sequence)).toEqual(mine.map((_, i) => i + 1));
      expect(mine[0]!.body).toMatchObject({
        specVersion: '1.1',
        type: 'execution.created',
        applicationId: app.applicationId,
        externalRef: created.body.task.externalRef,
      });
      for (const r of mine) {
        expect(
          verifySignature(r.signature, r.raw, app.callbackSecret, Math.floor(Date.now() / 1000)),
        ).toEqual({ ok: true });
      }
      expect(mine.at(-1)!.body.data.outputs.watermark).toEqual({
        archive: 'asset://watermarked(asset://cleaned)',
      });

      const timeline = (
        await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: app.apiKey })
      ).body.items.map((m: any) => m.kind);
      expect(timeline).toEqual([
        'CREATED',
        'STEP_READY',
        'WORKER_SELECTED',
        'STEP_READY',
        'WORKER_SELECTED',
        'FINISHED',
      ]);
      const log = (await h.request('GET', `/v1/tasks/${taskId}/callbacks`, { token: app.apiKey })).body.items;
      expect(log.every((d: any) => d.status === 'DELIVERED' && d.responseStatus === 204)).toBe(true);
    } finally {
      await worker.stop();
    }
  });

  it('a create places its ready first step itself once a worker is known: the answer shows it QUEUED on that worker', async () => {
    const worker = await startZipWorker('node-inline', completeWith({ archive: 'asset://done' }));
    const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
    try {
      // The server reads the workers again after a registration; until then the scheduler places steps.
      let answer: any;
      await expect
        .poll(
          async () => {
            answer = (await submit(`inline-${newId()}`)).body;
            return answer.execution.steps[0].status;
          },
          { timeout: 5_000, interval: 50 },
        )
        .toBe('QUEUED');
      const taskId = answer.task.id;
      expect(answer.execution.steps.map((s: any) => s.status)).toEqual(['QUEUED', 'WAITING']);
      await expect
        .poll(() => worker.received.some((c) => c.taskId === taskId), { timeout: 5_000 })
        .toBe(true);
      const [request] = await sql`
        SELECT r.status FROM scheduling_request r JOIN step s ON s.id = r.step_id
        WHERE r.task_id = ${taskId} AND s.step_key = 'clean'`;
      expect(request?.status).toBe('DISPATCHED');
      await expect
        .poll(async () => (await taskStatus(taskId)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      const attempts = await sql`SELECT count(*)::int AS n FROM attempt WHERE task_id = ${taskId}`;
      expect(attempts[0]!.n).toBe(2);
    } finally {
      await sql.end();
      await worker.stop();
    }
  });

  it('delivers the callbacks of one execution one at a time and in sequence, however slowly the receiver answers', async () => {
    const arrived: number[] = [];
    let inFlight = 0;
    let mostInFlight = 0;
    const slow = createServer((req, res) => {
      let raw = '';
      req.on('data', (chunk) => {
        raw += chunk;
      });
      req.on('end', () => {
        inFlight += 1;
        mostInFlight = Math.max(mostInFlight, inFlight);
        // Slow enough that the execution's later callbacks are due while this one is being answered.
        setTimeout(() => {
          inFlight -= 1;
          arrived.push(JSON.parse(raw).sequence);
          res.writeHead(204).end();
        }, 150);
      });
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    const address = slow.address();
    const slowUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/slow`;
    const worker = await startZipWorker('node-slow-receiver', completeWith({ archive: 'asset://done' }));
    try {
      const created = await submit(`slow-receiver-${newId()}`, { callbackUrl: slowUrl });
      const taskId = created.body.task.id;
      await expect
        .poll(async () => (await taskStatus(taskId)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      const log = async () =>
        (await h.request('GET', `/v1/tasks/${taskId}/callbacks`, { token: app.apiKey })).body.items as {
          status: string;
        }[];
      await expect
        .poll(async () => (await log()).every((d) => d.status === 'DELIVERED'), { timeout: 15_000 })
        .toBe(true);
      const count = (await log()).length;
      expect(count).toBeGreaterThan(2);
      expect(arrived).toEqual(Array.from({ length: count }, (_, i) => i + 1));
      expect(mostInFlight).toBe(1);
    } finally {
      await worker.stop();
      await new Promise((resolve) => slow.close(resolve));
    }
  });

  it('a receiver failing 3 times then succeeding gets each sequence delivered and acknowledged once', async () => {
    const worker = await startZipWorker('node-2', completeWith({ archive: 'a' }));
    try {
      failNext = 3;
      const created = await submit(`flaky-${newId()}`);
      const taskId = created.body.task.id;
      // Back-off is 2, 4, 8 s of the injected clock: move it along until the first delivery lands.
      await expect
        .poll(async () => (await taskStatus(taskId)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      // Failed deliveries back off 2, 4, 8 s on the injected clock: move it along until every one is delivered.
      const log = async () =>
        (await h.request('GET', `/v1/tasks/${taskId}/callbacks`, { token: app.apiKey })).body.items as any[];
      await expect
        .poll(
          async () => {
            h.clock.advance(10_000);
            return (await log()).every((d) => d.status === 'DELIVERED');
          },
          { timeout: 30_000, interval: 500 },
        )
        .toBe(true);
      const deliveries = await log();
      const sequences = received
        .filter((r) => r.body.taskId === taskId)
        .map((r) => r.body.sequence)
        .sort((a, b) => a - b);
      expect(sequences).toEqual(deliveries.map((d) => d.sequence));
      expect(deliveries.reduce((sum, d) => sum + d.attempts, 0)).toBe(deliveries.length + 3);
      expect(deliveries.some((d) => d.attempts > 1)).toBe(true);
    } finally {
      h.clock.set(new Date());
      await worker.stop();
    }
  });

  it('a receiver that never accepts: the delivery reads RETRYING, DEAD after the 20th failure, DELIVERED once :redeliver sends it again', async () => {
    failNext = Number.POSITIVE_INFINITY;
    const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
    try {
      // No worker offers these capabilities, so the only callback is the execution's creation.
      const created = await submit(`dead-${newId()}`);
      const taskId = created.body.task.id;
      const log = async () =>
        (await h.request('GET', `/v1/tasks/${taskId}/callbacks`, { token: app.apiKey })).body.items as any[];
      // A failed attempt that will be tried again reads RETRYING (stored FAILED), with its error.
      await expect.poll(async () => (await log())[0]?.status, { timeout: 10_000 }).toBe('RETRYING');
      expect((await log())[0]).toMatchObject({ deliveredAt: null, lastError: expect.any(String) });
      // Nineteen failures already behind it, next try far in the future so the server's own sender
      // leaves it alone; a sender of our own, on a clock past that, makes the twentieth attempt.
      const later = new Date(Date.now() + 365 * 86_400_000);
      await expect
        .poll(async () => {
          const moved = await sql`
            UPDATE callback_delivery SET attempts = 19, available_at = ${later}
            WHERE task_id = ${taskId} AND status = 'FAILED' RETURNING id`;
          return moved.length;
        })
        .toBe(1);
      const sender = {
        queue: new PostgresCallbackQueue(sql),
        clock: { now: () => new Date(later.getTime() + 1_000) },
        signingSecrets: async () => [app.callbackSecret],
        post: async (url: string, body: string, headers: Record<string, string>) => {
          const response = await fetch(url, { method: 'POST', body, headers });
          return { status: response.status };
        },
        random: () => 0.5,
      };
      expect(await sendDueCallbacks(sender, 10)).toMatchObject({ claimed: 1, delivered: 0 });
      const [dead] = await log();
      expect(dead).toMatchObject({ status: 'DEAD', attempts: 20 });
      expect(received.some((r) => r.body.taskId === taskId)).toBe(false);

      failNext = 0;
      const other = await h.request('POST', `/v1/callbacks/${newId()}:redeliver`, { token: app.apiKey });
      expect(other.status).toBe(404);
      const again = await h.request('POST', `/v1/callbacks/${dead.id}:redeliver`, { token: app.apiKey });
      expect(again.status).toBeLessThan(300);
      await expect.poll(async () => (await log())[0]?.status, { timeout: 10_000 }).toBe('DELIVERED');
      expect(received.filter((r) => r.body.taskId === taskId)).toHaveLength(1);
    } finally {
      failNext = 0;
      await sql.end();
    }
  });

  it('refuses events for attempts the worker does not hold, or with an old lease, and changes nothing', async () => {
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-3',
      capabilities: [{ name: 'other.cap', version: '1' }],
      handler: async () => {},
    });
    try {
      const res: any = await worker.report([
        { attemptId: newId(), leaseVersion: 1, eventId: newId(), eventType: 'STEP_STARTED', sourceSeq: 1 },
      ]);
      expect(res.results[0]).toMatchObject({ ok: false, code: 'STEP_NOT_REGISTERED' });
      const unknownWorker = await fetch(`${h.url}/v1/workers/${newId()}/events:batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${workerKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          events: [
            {
              attemptId: newId(),
              leaseVersion: 1,
              eventId: newId(),
              eventType: 'STEP_STARTED',
              sourceSeq: 1,
            },
          ],
        }),
      });
      expect(unknownWorker.status).toBe(401);
      const appKeyAsWorker = await fetch(`${h.url}/v1/workers/register`, {
        method: 'POST',
        headers: { authorization: `Bearer ${app.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          instanceId: 'x',
          name: 'x',
          nodeId: 'n',
          capabilities: [{ name: 'a', version: '1' }],
        }),
      });
      expect(appKeyAsWorker.status).toBe(401);
    } finally {
      await worker.stop();
    }
  });
});
