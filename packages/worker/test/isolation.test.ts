/**
 * Capability isolation against a real TDP server: capabilities that exit, throw from a timer, allocate
 * without bound, loop forever and crash natively run on one worker beside a well-behaved one. Each fails
 * its own attempt with its code; the well-behaved one finishes, and the worker keeps serving. Attempts run
 * in runner processes, never in the worker's, and get their progress, checkpoints and logs through it.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { type RunningWorker, startWorker } from '../src/index.ts';
import type { Logger } from '../src/options.ts';
import { endedTask, submitTask } from './support.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let worker: RunningWorker;
const logged: { message: string; fields: Record<string, unknown> }[] = [];
const logger: Logger = {
  info: (fields, message) => logged.push({ message, fields }),
  warn: (fields, message) => logged.push({ message, fields }),
  error: (fields, message) => logged.push({ message, fields }),
};
const directory = mkdtempSync(join(tmpdir(), 'tdp-isolation-'));
const capabilities = [
  'test.shout',
  'hostile.exit',
  'hostile.timer-throw',
  'hostile.allocate',
  'hostile.loop',
  'hostile.segfault',
  'hostile.deaf',
  'hostile.bad-progress',
];

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  for (const capability of capabilities)
    await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: {
        name: capability.replace('.', '-'),
        version: '1',
        steps: [
          {
            key: 'only',
            capability,
            capabilityVersion: '1',
            inputMapping:
              capability === 'test.shout' ? { text: '$.input.text', delayMs: '$.input.delayMs' } : {},
            retry: { maxAttempts: 1 },
          },
        ],
      },
    });
  worker = await startWorker({
    url: h.url,
    key: workerKey,
    capabilityModule: new URL('./fixtures/capabilities.ts', import.meta.url),
    limits: { memoryLimitMb: 256, timeLimitMs: 4_000 },
    database: join(directory, 'worker.db'),
    concurrency: 10,
    handleSignals: false,
    logger,
  });
});

afterAll(async () => {
  await worker?.drain();
  await h?.close();
});

const submit = (capability: string, input: Record<string, unknown> = {}) =>
  submitTask(h, app.apiKey, capability.replace('.', '-'), input);
const finished = (taskId: string) => endedTask(h, app.apiKey, taskId);

describe('a capability that misbehaves', () => {
  it('fails its own attempt with its code while the others finish and the worker keeps serving', async () => {
    const hostile = {
      'hostile.exit': 'CAPABILITY_CRASHED',
      'hostile.timer-throw': 'CAPABILITY_CRASHED',
      'hostile.segfault': 'CAPABILITY_CRASHED',
      'hostile.allocate': 'CAPABILITY_OUT_OF_MEMORY',
      'hostile.loop': 'CAPABILITY_TIMED_OUT',
      'hostile.bad-progress': 'CAPABILITY_CRASHED',
    };
    const normal = await submit('test.shout', { text: 'beside them', delayMs: 1_000 });
    const tasks = await Promise.all(
      Object.keys(hostile).map(async (capability) => [capability, await submit(capability)] as const),
    );
    for (const [capability, taskId] of tasks) {
      const view = await finished(taskId);
      expect({ capability, status: view.task.lifecycleStatus }).toEqual({ capability, status: 'FAILED' });
      expect(view.execution.steps[0].error).toMatchObject({
        code: hostile[capability as keyof typeof hostile],
        retryable: true,
      });
    }
    const view = await finished(normal);
    expect(view.task.lifecycleStatus).toBe('SUCCEEDED');
    expect(view.execution.steps[0].data.shouted).toBe('BESIDE THEM');
    // The attempt ran in a runner, not in the worker (this process).
    expect(view.execution.steps[0].data.pid).not.toBe(process.pid);

    // The worker is the same and still takes work.
    expect(worker.runtime.status()).toMatchObject({ state: 'READY' });
    const after = await finished(await submit('test.shout', { text: 'still here', delayMs: 0 }));
    expect(after.execution.steps[0].data.shouted).toBe('STILL HERE');
  });

  it('keeps a capability’s own failure, progress, checkpoint, log and context names across the process boundary', async () => {
    const failed = await finished(await submit('test.shout', { text: '', delayMs: 0 }));
    expect(failed.execution.steps[0].error).toMatchObject({
      code: 'TEXT_EMPTY',
      retryable: false,
      userMessage: 'There is nothing to shout.',
    });
    const taskId = await submit('test.shout', { text: 'progress', delayMs: 0 });
    const step = (await finished(taskId)).execution.steps[0];
    // Its context names the step by its key and the attempt by its id; `stepId` stays for old code.
    expect(step.data.context).toEqual({ stepKey: 'only', stepId: 'only', attemptId: step.attemptId });
    expect(step.attemptId).toEqual(expect.any(String));
    const events = (await h.request('GET', `/v1/tasks/${taskId}/events`, { token: app.apiKey })).body
      .items as { eventType: string; payload: any }[];
    expect(events.find((e) => e.eventType === 'STEP_PROGRESS')?.payload).toMatchObject({
      progress: { percent: 50 },
    });
    const local = new Database(join(directory, 'worker.db'), { readonly: true });
    try {
      const rows = local.prepare('SELECT checkpoint FROM attempt WHERE task_id = ?').all(taskId);
      expect(rows).toEqual([{ checkpoint: JSON.stringify({ half: true }) }]);
    } finally {
      local.close();
    }
    expect(logged.some((l) => l.message === 'shouting' && l.fields.taskId === taskId)).toBe(true);
  });

  it('is stopped when its task is cancelled, even when it ignores the abort', async () => {
    const taskId = await submit('hostile.deaf');
    await expect
      .poll(
        async () =>
          (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body.execution.steps[0]
            ?.status,
        { timeout: 20_000, interval: 100 },
      )
      .toBe('RUNNING');
    const cancel = await h.request('POST', `/v1/tasks/${taskId}:cancel`, {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: {},
    });
    expect(cancel.status).toBeLessThan(300);
    const view = await finished(taskId);
    expect(view.task.lifecycleStatus).toBe('CANCELLED');
    await expect.poll(() => worker.runtime.status().running, { timeout: 10_000 }).toBe(0);
  });
});
