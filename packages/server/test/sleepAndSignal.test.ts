/**
 * Sleep and signal steps on a real server, real PostgreSQL and a real worker, the clock moved by the
 * test (by less than the worker's heartbeat lifetime, so the worker stays placeable): a sleep waits for its timer and hands its time on; a signal ends its wait with its payload,
 * whether it arrives after the step is reached or before; a bad payload, an unknown name and another
 * application's task are refused and change nothing; a repeat with the same key answers as the first.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { completeWith, type StartCommand, startTestWorker } from '../../../test/testWorker.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
const seen: StartCommand[] = [];
/** While set, `kinds.first` waits for it before it completes. */
let gate: Promise<void> | null = null;

const workflow = (name: string, steps: Record<string, unknown>[], inputSchema?: Record<string, unknown>) => ({
  name,
  version: '1',
  ...(inputSchema ? { inputSchema } : {}),
  steps,
});
const echo = (key: string, dependsOn: string[], inputMapping: Record<string, unknown>) => ({
  key,
  capability: 'kinds.echo',
  capabilityVersion: '1',
  dependsOn,
  inputMapping,
  retry: { maxAttempts: 1 },
});
const publish = (body: Record<string, unknown>) =>
  h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body });
const start = async (workflowName: string, input: unknown = {}) => {
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': `k-${Math.random()}` },
    body: { workflowName, workflowVersion: '1', name: workflowName, input },
  });
  expect(created.status).toBe(201);
  return created.body.task.id as string;
};
const read = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
const stepOf = async (taskId: string, key: string) =>
  (await read(taskId)).execution.steps.find((s: { key: string }) => s.key === key);
const waitingOf = (taskId: string, key: string) =>
  expect.poll(async () => (await stepOf(taskId, key))?.waitingFor?.kind ?? null, { timeout: 15_000 });
const endOf = (taskId: string) =>
  expect.poll(async () => (await read(taskId)).task.lifecycleStatus, { timeout: 15_000 });
const signal = (
  taskId: string,
  name: string,
  payload: unknown,
  key = `s-${Math.random()}`,
  token = app.apiKey,
) =>
  h.request('POST', `/v1/tasks/${taskId}/signals/${name}`, {
    token,
    headers: { 'idempotency-key': key },
    body: { payload },
  });

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-kinds',
    capabilities: [
      { name: 'kinds.echo', version: '1' },
      { name: 'kinds.first', version: '1' },
    ],
    handler: async (command, report) => {
      seen.push(command);
      if (command.capability === 'kinds.first') await gate;
      return completeWith({ echoed: command.input })(command, report);
    },
  });
  const published = await Promise.all([
    publish(
      workflow('nap', [
        { key: 'nap', kind: 'sleep', sleep: { durationMs: 5_000 } },
        echo('after', ['nap'], { woke: '$.steps.nap.output.sleptUntil' }),
      ]),
    ),
    publish(
      workflow('nap-until', [
        { key: 'nap', kind: 'sleep', sleep: { until: '$.input.notBefore' } },
        echo('after', ['nap'], { woke: '$.steps.nap.output.sleptUntil' }),
      ]),
    ),
    publish(
      workflow('go', [
        {
          key: 'go',
          kind: 'signal',
          signal: {
            name: 'go',
            timeoutMs: 8_000,
            payloadSchema: { type: 'object', required: ['ok'], properties: { ok: { type: 'boolean' } } },
          },
        },
        echo('use', ['go'], { ok: '$.steps.go.output.ok' }),
      ]),
    ),
    publish(
      workflow('go-later', [
        { key: 'first', capability: 'kinds.first', capabilityVersion: '1' },
        { key: 'go', kind: 'signal', dependsOn: ['first'], signal: { name: 'go' } },
        echo('use', ['go'], { note: '$.steps.go.output.note' }),
      ]),
    ),
  ]);
  expect(published.map((p) => p.status)).toEqual([201, 201, 201, 201]);
});
afterAll(async () => {
  await worker?.stop();
  await h?.close();
});

describe('publishing step kinds', () => {
  it('refuses bad kind options with the path, and publishes nothing', async () => {
    const cases: [Record<string, unknown>[], string][] = [
      [[{ key: 'nap', kind: 'sleep', sleep: { durationMs: 5, until: '$.input.at' } }], '/steps/0/sleep'],
      [[{ key: 'nap', kind: 'sleep' }], '/steps/0/sleep'],
      [[{ key: 'go', kind: 'signal', signal: { name: 'go' }, sleep: { durationMs: 5 } }], '/steps/0/sleep'],
      [[{ key: 'plain' }], '/steps/0/capability'],
      [
        [
          echo('a', [], {}),
          { key: 'nap', kind: 'sleep', sleep: { until: '$.steps.b.output.at' } },
          echo('b', [], {}),
        ],
        '/steps/1/sleep/until',
      ],
      [
        [{ key: 'go', kind: 'signal', signal: { name: 'go', payloadSchema: { type: 'nonsense' } } }],
        '/steps/0/signal/payloadSchema',
      ],
    ];
    for (const [steps, path] of cases) {
      const refused = await publish(workflow('refused', steps));
      expect(refused.status, JSON.stringify(steps)).toBe(422);
      expect(refused.body.code).toBe('WORKFLOW_DEFINITION_INVALID');
      const paths: string[] = refused.body.errors.map((e: { path: string }) => e.path);
      expect(
        paths.some((p) => p.startsWith(path)),
        paths.join(),
      ).toBe(true);
    }
    expect((await h.request('GET', '/v1/workflow-definitions/refused/1', { token: app.apiKey })).status).toBe(
      404,
    );
  });
});

describe('sleep', () => {
  it('waits for its timer, shows what it waits for, then hands its time to the next step', async () => {
    const startedAt = h.clock.now().getTime();
    const taskId = await start('nap');
    await waitingOf(taskId, 'nap').toBe('sleep');
    const nap = await stepOf(taskId, 'nap');
    expect(nap.status).toBe('RUNNING');
    expect(new Date(nap.waitingFor.until).getTime() - startedAt).toBeGreaterThanOrEqual(5_000);
    expect((await read(taskId)).task.lifecycleStatus).toBe('RUNNING');
    h.clock.advance(2_000);
    await new Promise((r) => setTimeout(r, 300));
    expect((await stepOf(taskId, 'nap')).status).toBe('RUNNING');
    h.clock.advance(3_500);
    await endOf(taskId).toBe('SUCCEEDED');
    const after = seen.find((c) => c.taskId === taskId && c.stepId === 'after')!;
    expect(after.input.woke).toBe(nap.waitingFor.until);
    expect((await stepOf(taskId, 'nap')).waitingFor).toBeNull();
  });

  it('until a time from the input: one already past ends at once; a non-time fails the step', async () => {
    const past = new Date(h.clock.now().getTime() - 1_000).toISOString();
    const done = await start('nap-until', { notBefore: past });
    await endOf(done).toBe('SUCCEEDED');
    expect(seen.find((c) => c.taskId === done && c.stepId === 'after')!.input.woke).toBe(past);

    const broken = await start('nap-until', { notBefore: 'tomorrow-ish' });
    await endOf(broken).toBe('FAILED');
    expect((await stepOf(broken, 'nap')).error.code).toBe('INPUT_MAPPING_FAILED');
  });
});

describe('signal', () => {
  it('ends the wait with its payload; a bad payload is refused and not kept; a repeat answers the same', async () => {
    const taskId = await start('go');
    await waitingOf(taskId, 'go').toBe('signal');
    expect((await stepOf(taskId, 'go')).waitingFor.name).toBe('go');

    const bad = await signal(taskId, 'go', { ok: 'yes' });
    expect(bad.status).toBe(422);
    expect(bad.body.code).toBe('SIGNAL_PAYLOAD_INVALID');
    expect((await stepOf(taskId, 'go')).status).toBe('RUNNING');

    const sent = await signal(taskId, 'go', { ok: true }, 'go-1');
    expect(sent.status).toBe(202);
    expect(sent.body.consumedByStep).toBe('go');
    const again = await signal(taskId, 'go', { ok: true }, 'go-1');
    expect(again.status).toBe(200);
    expect(again.body.signalId).toBe(sent.body.signalId);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const reused = await signal(taskId, 'go', { ok: false }, 'go-1');
    expect(reused.status).toBe(409);
    expect(reused.body.code).toBe('IDEMPOTENCY_KEY_REUSED');

    await endOf(taskId).toBe('SUCCEEDED');
    expect((await stepOf(taskId, 'go')).data).toEqual({ ok: true });
    expect(seen.find((c) => c.taskId === taskId && c.stepId === 'use')!.input.ok).toBe(true);
    // The task has ended: a new signal is refused.
    expect((await signal(taskId, 'go', { ok: true })).status).toBe(409);
  });

  it('a signal sent before its step is reached is kept, and taken when the step begins', async () => {
    let open!: () => void;
    gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const taskId = await start('go-later');
    await expect.poll(() => seen.some((c) => c.taskId === taskId && c.stepId === 'first')).toBe(true);
    const early = await signal(taskId, 'go', { note: 'sent early' });
    expect(early.status).toBe(202);
    expect(early.body.consumedByStep).toBeNull();
    expect((await stepOf(taskId, 'go')).status).toBe('WAITING');
    open();
    gate = null;
    await endOf(taskId).toBe('SUCCEEDED');
    expect(seen.find((c) => c.taskId === taskId && c.stepId === 'use')!.input.note).toBe('sent early');
  });

  it("the operator's signal (admin token) needs a reason, ends the wait and keeps the reason", async () => {
    const taskId = await start('go');
    await waitingOf(taskId, 'go').toBe('signal');
    const operator = (body: Record<string, unknown>, token = h.adminToken) =>
      h.request('POST', `/admin/v1/tasks/${taskId}/signals/go`, {
        token,
        headers: { 'idempotency-key': 'op-1' },
        body,
      });
    expect((await operator({ payload: { ok: true } })).status).toBe(400);
    expect((await operator({ payload: { ok: true }, reason: 'stuck' }, app.apiKey)).status).toBe(401);
    const sent = await operator({ payload: { ok: true }, reason: 'customer asked on the phone' });
    expect(sent.status).toBe(202);
    expect(sent.body.consumedByStep).toBe('go');
    await endOf(taskId).toBe('SUCCEEDED');
    const timeline = await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: app.apiKey });
    expect(JSON.stringify(timeline.body)).toContain('customer asked on the phone');
    const events = await h.request('GET', `/v1/tasks/${taskId}/events`, { token: app.apiKey });
    const completed = events.body.items.find(
      (e: { eventType: string; stepId: string }) => e.eventType === 'STEP_COMPLETED' && e.stepId === 'go',
    );
    expect(completed.producerId).toBe('operator:bootstrap admin token');
  });

  it('a cancel while only the platform waits ends the task at once; a later signal is refused', async () => {
    const taskId = await start('go');
    await waitingOf(taskId, 'go').toBe('signal');
    const cancelled = await h.request('POST', `/v1/tasks/${taskId}:cancel`, { token: app.apiKey, body: {} });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.task.lifecycleStatus).toBe('CANCELLED');
    expect((await stepOf(taskId, 'go')).status).toBe('CANCELLED');
    expect((await signal(taskId, 'go', { ok: true })).status).toBe(409);
  });

  it('times out without the signal; the step fails with SIGNAL_TIMED_OUT', async () => {
    const taskId = await start('go');
    await waitingOf(taskId, 'go').toBe('signal');
    h.clock.advance(8_001);
    await endOf(taskId).toBe('FAILED');
    expect((await stepOf(taskId, 'go')).error.code).toBe('SIGNAL_TIMED_OUT');
    expect((await stepOf(taskId, 'go')).waitingFor).toBeNull();
    expect((await read(taskId)).task.failure.code).toBe('SIGNAL_TIMED_OUT');
  });

  it("refuses an unknown signal name and another application's task, keeping nothing", async () => {
    const taskId = await start('go');
    await waitingOf(taskId, 'go').toBe('signal');
    const unknown = await signal(taskId, 'stop', { ok: true });
    expect(unknown.status).toBe(422);
    expect(unknown.body.code).toBe('SIGNAL_UNKNOWN');
    const other = await h.createApplication();
    const foreign = await signal(taskId, 'go', { ok: true }, 'x', other.apiKey);
    expect(foreign.status).toBe(404);
    expect(foreign.body.code).toBe('TASK_NOT_FOUND');
    expect((await stepOf(taskId, 'go')).status).toBe('RUNNING');
    const missingKey = await h.request('POST', `/v1/tasks/${taskId}/signals/go`, {
      token: app.apiKey,
      body: { payload: { ok: true } },
    });
    expect(missingKey.status).toBe(400);
    expect(missingKey.body.code).toBe('IDEMPOTENCY_KEY_REQUIRED');
    // Still waiting: the refused requests kept nothing; the next good one is taken.
    expect((await signal(taskId, 'go', { ok: false })).body.consumedByStep).toBe('go');
    await endOf(taskId).toBe('SUCCEEDED');
  });
});
