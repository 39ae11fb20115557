/**
 * A failing sibling stops the running steps (issue 40, trap 4): the task that fails tells the workers of
 * its other running attempts to stop (CANCEL_ATTEMPT, as a cancel does), and their late reports are
 * refused as reports of an attempt that is over.
 */
import { newId } from '@tdp/protocol';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { attemptEvent, failWith, startTestWorker } from '../../../test/testWorker.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
let sql: ReturnType<typeof connectDatabase>;
/** The server's own log, from debug up. */
const logLines: { level: number; msg: string; eventId?: string; errorCode?: string }[] = [];

beforeAll(async () => {
  const logger = pino({ level: 'debug' }, { write: (line: string) => logLines.push(JSON.parse(line)) });
  h = await startHarness({ runLoops: true, logger });
  app = await h.createApplication();
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
  const root = (key: string, capability: string) => ({
    key,
    capability,
    capabilityVersion: '1',
    failurePolicy: 'FAIL_TASK',
    retry: { maxAttempts: 1 },
  });
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: { name: 'siblings-wf', version: '1', steps: [root('slow', 'slow.op'), root('fast', 'fast.op')] },
  });
  expect(published.status).toBeLessThan(300);
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
});
afterAll(async () => {
  await sql.end();
  await h.close();
});

const taskOf = async (id: string) => (await h.request('GET', `/v1/tasks/${id}`, { token: app.apiKey })).body;
const stepOf = async (id: string, key: string) =>
  ((await taskOf(id)).execution.steps as { key: string; status: string }[]).find((s) => s.key === key);

describe('a failing sibling', () => {
  it('sends CANCEL_ATTEMPT to the running sibling, which ends CANCELLED, and refuses its late reports as over', async () => {
    const cancels: string[] = [];
    const slow = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-slow',
      capabilities: [{ name: 'slow.op', version: '1' }],
      handler: async (command, report) => {
        await report([attemptEvent(command, 'STEP_STARTED', 1)]);
      },
      onCommand: (command) => {
        if (command.type === 'CANCEL_ATTEMPT') cancels.push(command.attemptId);
      },
    });
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: 'siblings-wf', workflowVersion: '1', name: 'siblings' },
    });
    const taskId = created.body.task.id as string;
    await expect
      .poll(async () => (await stepOf(taskId, 'slow'))?.status, { timeout: 10_000 })
      .toBe('RUNNING');
    // Only now can the fast step be placed: it fails while its sibling runs.
    const fast = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-fast',
      capabilities: [{ name: 'fast.op', version: '1' }],
      handler: failWith({ category: 'BUSINESS', code: 'BROKEN_INPUT', retryable: false }),
    });
    try {
      await expect
        .poll(async () => (await taskOf(taskId)).task.lifecycleStatus, { timeout: 10_000 })
        .toBe('FAILED');
      const slowCommand = slow.received.find((c) => c.taskId === taskId)!;
      // The sibling is stopped as a cancel stops it: a CANCEL_ATTEMPT row for its worker, read by it.
      const rows = await sql<{ payload: { attemptId: string } }[]>`
        SELECT payload FROM worker_command WHERE worker_id = ${slow.workerId} AND type = 'CANCEL_ATTEMPT'`;
      expect(rows.map((r) => r.payload.attemptId)).toEqual([slowCommand.attemptId]);
      await expect.poll(() => cancels, { timeout: 10_000 }).toEqual([slowCommand.attemptId]);
      expect((await stepOf(taskId, 'slow'))?.status).toBe('CANCELLED');
      expect((await taskOf(taskId)).execution.status).toBe('FAILED');
      // A report still in flight is refused with the code the worker reads as "the attempt is over".
      const lateEvent = attemptEvent(slowCommand, 'STEP_PROGRESS', 2, { progress: { percent: 50 } });
      const late = (await slow.report([lateEvent])) as { results: { ok: boolean; code?: string }[] };
      expect(late.results[0]).toMatchObject({
        ok: false,
        code: 'INVALID_TRANSITION',
      });
      // The server logs it quietly (debug), a refusal for another reason still at warn.
      const wrongWorker = attemptEvent(slowCommand, 'STEP_PROGRESS', 3);
      expect(((await fast.report([wrongWorker])) as { results: { code?: string }[] }).results[0]?.code).toBe(
        'STEP_NOT_REGISTERED',
      );
      const about = (eventId: string) =>
        logLines
          .filter((l) => l.eventId === eventId)
          .map(({ level, msg, errorCode }) => ({ level, msg, errorCode }));
      expect(about(lateEvent.eventId)).toEqual([
        { level: 20, msg: 'event refused: its attempt is over', errorCode: 'INVALID_TRANSITION' },
      ]);
      expect(about(wrongWorker.eventId)).toEqual([
        { level: 40, msg: 'event refused', errorCode: 'STEP_NOT_REGISTERED' },
      ]);
    } finally {
      await slow.stop();
      await fast.stop();
    }
  });
});
