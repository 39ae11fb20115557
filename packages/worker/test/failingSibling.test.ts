/**
 * A failing sibling stops a running capability (issue 40, trap 4), against a real server: its `ctx.signal`
 * aborts, and the reports the server refuses because the attempt is over are logged at debug, not warned.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { CapabilityError, defineCapability, LocalStore, WorkerClient, WorkerRuntime } from '../src/index.ts';
import type { Logger } from '../src/options.ts';
import { submitTask, taskView } from './support.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
const directory = mkdtempSync(join(tmpdir(), 'tdp-failing-sibling-'));

let slowStarted: () => void;
const started = new Promise<void>((resolve) => {
  slowStarted = resolve;
});
let abortedWith: unknown;
const slow = defineCapability({
  name: 'sibling.slow',
  version: '1',
  input: Type.Object({}),
  output: Type.Object({}),
  run: async (ctx) => {
    slowStarted();
    // Reports progress until it is told to stop (or a minute passes: the test then fails).
    for (let i = 1; i < 600 && !ctx.signal.aborted; i++) {
      ctx.progress(i % 100, { phase: `round ${i}` });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    abortedWith = ctx.signal.aborted ? ctx.signal.reason : null;
    return {};
  },
});
const fast = defineCapability({
  name: 'sibling.fast',
  version: '1',
  input: Type.Object({}),
  output: Type.Object({}),
  run: async () => {
    await started;
    throw new CapabilityError('BROKEN_INPUT', 'The input is broken.', { retryable: false });
  },
});

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  const root = (key: string, capability: string) => ({
    key,
    capability,
    capabilityVersion: '1',
    failurePolicy: 'FAIL_TASK',
    retry: { maxAttempts: 1 },
  });
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'siblings-wf',
      version: '1',
      steps: [root('slow', 'sibling.slow'), root('fast', 'sibling.fast')],
    },
  });
  expect(published.status).toBeLessThan(300);
});
afterAll(async () => {
  await h?.close();
});

/** A logger that keeps the lines it is given, debug ones included. */
const recording = () => {
  const lines: { level: string; message: string }[] = [];
  const at = (level: string) => (_fields: Record<string, unknown>, message: string) => {
    lines.push({ level, message });
  };
  const logger: Logger = { info: at('info'), warn: at('warn'), error: at('error'), debug: at('debug') };
  return { lines, logger };
};

describe('a failing sibling', () => {
  it("aborts the running step's ctx.signal, and its refused late reports are not warned", async () => {
    const key = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
      .body.key as string;
    const store = new LocalStore(join(directory, 'worker.db'), newId);
    const log = recording();
    const runtime = new WorkerRuntime({
      client: new WorkerClient(h.url, key, 5_000),
      store,
      capabilities: [slow, fast],
      nodeId: 'node-siblings',
      logger: log.logger,
    });
    await runtime.start();
    try {
      const taskId = await submitTask(h, app.apiKey, 'siblings-wf', {});
      await expect
        .poll(async () => (await taskView(h, app.apiKey, taskId)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('FAILED');
      await expect.poll(() => abortedWith, { timeout: 15_000 }).toBe('CANCELLED');
      // Its last reports (the newest progress, its end) reach the server and are refused: quietly.
      await expect.poll(() => store.unsentCount(), { timeout: 10_000 }).toBe(0);
      expect(
        log.lines.filter((l) => l.message.startsWith('event refused: its attempt is over')).length,
      ).toBeGreaterThan(0);
      expect(log.lines.filter((l) => l.level === 'warn' && l.message.startsWith('event refused'))).toEqual(
        [],
      );
      const steps = (await taskView(h, app.apiKey, taskId)).execution.steps as {
        key: string;
        status: string;
      }[];
      expect(Object.fromEntries(steps.map((s) => [s.key, s.status]))).toEqual({
        slow: 'CANCELLED',
        fast: 'FAILED',
      });
    } finally {
      await runtime.stop();
      store.close();
    }
  }, 60_000);
});
