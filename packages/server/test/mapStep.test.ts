/**
 * Fan-out over data (kind `map`) on a real server, real PostgreSQL and real (test) workers: a map over
 * an upstream output runs one attempt per item under `maxParallel`, its output is the item outputs in
 * item order, FAIL_ALL fails the step and cancels what has not started while CONTINUE collects the
 * errors, an item retries under the step's retry policy and after a lost worker, a non-array fails the
 * step with INPUT_MAPPING_FAILED naming the path, and bad definitions are refused at publish.
 */
import type { Centrifuge } from 'centrifuge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followTaskDetail } from '../../../test/followDetail.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { attemptEvent, completeWith, type StartCommand, startTestWorker } from '../../../test/testWorker.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
let sql: ReturnType<typeof connectDatabase>;

/** What the detect worker does with an item: by default its input doubled, after a delay. */
let behaviour: (command: StartCommand) => 'complete' | 'fail' | 'fail-retryable' | 'hang' = () => 'complete';
/** Items of each task running on the detect worker right now, and the most seen at once. */
const running = new Map<string, number>();
const mostAtOnce = new Map<string, number>();
const starts: StartCommand[] = [];
/** CANCEL_ATTEMPT commands the detect workers received (attempt ids). */
const cancelsSeen: string[] = [];
const seeCancels = (command: StartCommand & { type: string }) => {
  if (command.type === 'CANCEL_ATTEMPT') cancelsSeen.push(command.attemptId);
};
/** While set, each item waits for it before it finishes (the map stays running). */
let gate: Promise<void> | null = null;

const detect = async (command: StartCommand, report: (events: Record<string, unknown>[]) => Promise<any>) => {
  starts.push(command);
  const now = (running.get(command.taskId) ?? 0) + 1;
  running.set(command.taskId, now);
  mostAtOnce.set(command.taskId, Math.max(mostAtOnce.get(command.taskId) ?? 0, now));
  const n = Number(command.input.n ?? 0);
  // Later items finish sooner, so completions arrive out of item order.
  await new Promise((resolve) => setTimeout(resolve, 20 + (10 - (n % 10)) * 15));
  await gate;
  const what = behaviour(command);
  running.set(command.taskId, running.get(command.taskId)! - 1);
  if (what === 'hang') return;
  await report([attemptEvent(command, 'STEP_STARTED', 1)]);
  if (what === 'complete')
    await report([
      attemptEvent(command, 'STEP_COMPLETED', 2, {
        output: { frame: command.input.frame, doubled: n * 2, label: command.input.label },
      }),
    ]);
  else
    await report([
      attemptEvent(command, 'STEP_FAILED', 2, {
        error: { category: 'INPUT', code: 'FRAME_BROKEN', retryable: what === 'fail-retryable' },
      }),
    ]);
};

const frames = (count: number) => Array.from({ length: count }, (_, n) => ({ id: `f${n}`, n }));

/** extract (a capability step) → detect (a map over its frames) → summary (reads the map's output). */
const videoWorkflow = (name: string, map: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  name,
  version: '1',
  steps: [
    {
      key: 'extract',
      capability: 'map.extract',
      capabilityVersion: '1',
      inputMapping: { count: '$.input.count' },
    },
    {
      key: 'detect',
      kind: 'map',
      dependsOn: ['extract'],
      map: {
        items: '$.steps.extract.output.frames',
        capability: 'map.detect',
        capabilityVersion: '1',
        inputMapping: { frame: '$.item.id', n: '$.item.n', label: '$.input.label' },
        ...map,
      },
      ...extra,
    },
    {
      key: 'summary',
      capability: 'map.summary',
      capabilityVersion: '1',
      dependsOn: ['detect'],
      inputMapping: { detections: '$.steps.detect.output' },
    },
  ],
});

const publish = (body: unknown) => h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body });
const submit = (workflowName: string, input: Record<string, unknown>) =>
  h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': `${workflowName}-${Math.random()}` },
    body: { workflowName, workflowVersion: '1', name: workflowName, input, ownerId: 'map-owner' },
  });
const status = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
const stepOf = async (taskId: string, key: string) =>
  (await status(taskId)).execution.steps.find((s: any) => s.stepId === key || s.key === key);
const endOf = (taskId: string, lifecycle: string) =>
  expect.poll(async () => (await status(taskId)).task.lifecycleStatus, { timeout: 20_000 }).toBe(lifecycle);

const clients: Centrifuge[] = [];
/** The task's detail channel through the real gateway, as a browser of the task's owner follows it. */
const followDetail = (taskId: string) => followTaskDetail(h, app.apiKey, 'map-owner', taskId, clients);

const workers: Awaited<ReturnType<typeof startTestWorker>>[] = [];
let detectWorker: Awaited<ReturnType<typeof startTestWorker>>;

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
  workers.push(
    await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-map-steps',
      capabilities: [
        { name: 'map.extract', version: '1' },
        { name: 'map.summary', version: '1' },
      ],
      handler: async (command, report) => {
        if (command.capability === 'map.extract')
          return completeWith({ frames: frames(Number(command.input.count)) })(command, report);
        return completeWith({ seen: (command.input.detections as unknown[]).length })(command, report);
      },
    }),
  );
  detectWorker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-map-detect',
    capabilities: [{ name: 'map.detect', version: '1' }],
    maxConcurrency: 20,
    handler: detect,
    onCommand: seeCancels,
  });
  workers.push(detectWorker);
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  for (const worker of workers) await worker.stop();
  await sql?.end();
  await h?.close();
});

describe('map steps', () => {
  it('runs one attempt per item of an upstream output, never more than maxParallel at once, with the outputs in item order', async () => {
    behaviour = () => 'complete';
    let open = () => {};
    gate = new Promise((resolve) => {
      open = resolve;
    });
    expect((await publish(videoWorkflow('map-parallel', { maxParallel: 3 }))).status).toBe(201);
    const taskId = (await submit('map-parallel', { count: 10, label: 'cat' })).body.task.id;
    // While the first items wait, the task shows the map's counters.
    await expect
      .poll(async () => (await stepOf(taskId, 'detect'))?.waitingFor?.running, { timeout: 15_000 })
      .toBe(3);
    const waiting = (await stepOf(taskId, 'detect')).waitingFor;
    expect(waiting).toMatchObject({ kind: 'map', total: 10, running: 3, succeeded: 0, failed: 0 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(starts.filter((c) => c.taskId === taskId)).toHaveLength(3);
    const published = await followDetail(taskId);
    gate = null;
    open();
    await endOf(taskId, 'SUCCEEDED');
    const detectStarts = starts.filter((c) => c.taskId === taskId);
    expect(detectStarts).toHaveLength(10);
    expect(mostAtOnce.get(taskId)).toBeLessThanOrEqual(3);
    expect(mostAtOnce.get(taskId)).toBeGreaterThanOrEqual(2);
    // The worker saw ordinary START_ATTEMPTs with the mapped input.
    expect(detectStarts.map((c) => c.input).sort((a, b) => Number(a.n) - Number(b.n))[4]).toEqual({
      frame: 'f4',
      n: 4,
      label: 'cat',
    });
    const step = await stepOf(taskId, 'detect');
    expect(step.status).toBe('SUCCEEDED');
    expect(step.waitingFor).toBeNull();
    expect(step.data).toEqual(frames(10).map((f) => ({ frame: f.id, doubled: f.n * 2, label: 'cat' })));
    expect((await stepOf(taskId, 'summary')).data).toEqual({ seen: 10 });
    // The task's realtime detail showed the counters move as items ended.
    await expect
      .poll(() => published.some((p) => p.state?.lifecycleStatus === 'SUCCEEDED'), { timeout: 10_000 })
      .toBe(true);
    const counters = published
      .map((p) => p.state.steps.find((st: any) => st.stepId === 'detect')?.waitingFor)
      .filter((w) => w?.kind === 'map');
    expect(counters.some((w) => w.succeeded > 0 && w.succeeded < 10)).toBe(true);
    expect(counters.every((w) => w.running <= 3 && w.total === 10)).toBe(true);
    // Items are rows of their own, not steps: the task has its three step rows.
    const stepRows = await sql`SELECT count(*)::int AS n FROM step WHERE task_id = ${taskId}`;
    expect(stepRows[0]!.n).toBe(3);
    const items = await sql`
      SELECT status, count(*)::int AS n FROM map_item WHERE step_id = (
        SELECT id FROM step WHERE task_id = ${taskId} AND step_key = 'detect') GROUP BY status`;
    expect(items.map((r) => [r.status, r.n])).toEqual([['SUCCEEDED', 10]]);
    // Every item attempt was revoked when it ended: the worker has its slots back.
    const unrevoked = await sql`
      SELECT count(*)::int AS n FROM attempt WHERE task_id = ${taskId} AND revoked_at IS NULL`;
    expect(unrevoked[0]!.n).toBe(0);
  });

  it('FAIL_ALL: the first item that fails fails the step and the task, and the items not started never run', async () => {
    behaviour = (command) => (command.input.n === 2 ? 'fail' : 'complete');
    expect(
      (await publish(videoWorkflow('map-fail-all', { maxParallel: 1, onItemFailure: 'FAIL_ALL' }))).status,
    ).toBe(201);
    const taskId = (await submit('map-fail-all', { count: 8, label: 'dog' })).body.task.id;
    await endOf(taskId, 'FAILED');
    const step = await stepOf(taskId, 'detect');
    expect(step.status).toBe('FAILED');
    expect(step.error.code).toBe('FRAME_BROKEN');
    expect(step.error.userMessage).toContain('Item 2');
    // Items 0, 1 and 2 ran; the five after them were cancelled before they started.
    expect(starts.filter((c) => c.taskId === taskId).map((c) => c.input.n)).toEqual([0, 1, 2]);
    const items = await sql`
      SELECT status, count(*)::int AS n FROM map_item WHERE step_id = (
        SELECT id FROM step WHERE task_id = ${taskId} AND step_key = 'detect') GROUP BY status ORDER BY status`;
    expect(items.map((r) => [r.status, r.n])).toEqual([
      ['CANCELLED', 5],
      ['FAILED', 1],
      ['SUCCEEDED', 2],
    ]);
    expect((await stepOf(taskId, 'summary')).status).not.toBe('SUCCEEDED');
  });

  it('CONTINUE: every item runs, and the output lists each item’s output or error in item order', async () => {
    behaviour = (command) => (command.input.n === 1 || command.input.n === 3 ? 'fail' : 'complete');
    expect(
      (await publish(videoWorkflow('map-continue', { maxParallel: 2, onItemFailure: 'CONTINUE' }))).status,
    ).toBe(201);
    const taskId = (await submit('map-continue', { count: 5, label: 'owl' })).body.task.id;
    await endOf(taskId, 'SUCCEEDED');
    const step = await stepOf(taskId, 'detect');
    expect(step.data).toEqual([
      { output: { frame: 'f0', doubled: 0, label: 'owl' } },
      { error: { code: 'FRAME_BROKEN' } },
      { output: { frame: 'f2', doubled: 4, label: 'owl' } },
      { error: { code: 'FRAME_BROKEN' } },
      { output: { frame: 'f4', doubled: 8, label: 'owl' } },
    ]);
    expect((await stepOf(taskId, 'summary')).data).toEqual({ seen: 5 });
  });

  it('an item that fails retryably runs again under the step’s retry policy, after its back-off', async () => {
    let failedOnce = false;
    behaviour = (command) => {
      if (command.input.n === 1 && !failedOnce) {
        failedOnce = true;
        return 'fail-retryable';
      }
      return 'complete';
    };
    expect(
      (
        await publish(
          videoWorkflow(
            'map-retry',
            { maxParallel: 2 },
            {
              failurePolicy: 'RETRY_THEN_FAIL_TASK',
              retry: { maxAttempts: 2, initialBackoffMs: 5_000, maxBackoffMs: 5_000, multiplier: 1 },
            },
          ),
        )
      ).status,
    ).toBe(201);
    const taskId = (await submit('map-retry', { count: 3, label: 'elk' })).body.task.id;
    await expect
      .poll(async () => (await stepOf(taskId, 'detect'))?.waitingFor?.succeeded, { timeout: 15_000 })
      .toBe(2);
    // Item 1 waits for its back-off on the injected clock.
    expect(starts.filter((c) => c.taskId === taskId)).toHaveLength(3);
    h.clock.advance(5_100);
    await endOf(taskId, 'SUCCEEDED');
    const itemOne = starts.filter((c) => c.taskId === taskId && c.input.n === 1);
    expect(itemOne.map((c) => c.attempt)).toEqual([1, 2]);
    expect((await stepOf(taskId, 'detect')).data[1]).toEqual({ frame: 'f1', doubled: 2, label: 'elk' });
  });

  it('an item whose worker is lost runs again elsewhere and the map ends', async () => {
    behaviour = (command) => (command.input.n === 0 && command.attempt === 1 ? 'hang' : 'complete');
    expect((await publish(videoWorkflow('map-lost', { maxParallel: 1 }))).status).toBe(201);
    const taskId = (await submit('map-lost', { count: 2, label: 'yak' })).body.task.id;
    await expect.poll(() => starts.some((c) => c.taskId === taskId), { timeout: 15_000 }).toBe(true);
    const hungOn = detectWorker.workerId;
    // Another worker joins; then the first one's session ends with the item's attempt still open.
    const second = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-map-second',
      capabilities: [{ name: 'map.detect', version: '1' }],
      handler: detect,
      onCommand: seeCancels,
    });
    workers.push(second);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await sql`UPDATE worker SET ended_at = ${h.clock.now()} WHERE id = ${hungOn}`;
    await expect
      .poll(
        async () => {
          const [row] = await sql`
          SELECT attempt, status FROM map_item WHERE item_index = 0 AND step_id = (
            SELECT id FROM step WHERE task_id = ${taskId} AND step_key = 'detect')`;
          return row?.status;
        },
        { timeout: 15_000 },
      )
      .toBe('WAITING_RETRY');
    h.clock.advance(2_000);
    await second.heartbeat();
    await endOf(taskId, 'SUCCEEDED');
    const attempts = await sql`
      SELECT worker_id FROM attempt WHERE task_id = ${taskId} AND item_index = 0 ORDER BY created_at, id`;
    expect(attempts.map((a) => a.worker_id)).toEqual([hungOn, second.workerId]);
  });

  it('cancelling the task cancels the map’s items and frees the workers’ slots', async () => {
    behaviour = () => 'complete';
    let open = () => {};
    gate = new Promise((resolve) => {
      open = resolve;
    });
    try {
      expect((await publish(videoWorkflow('map-cancel', { maxParallel: 2 }))).status).toBe(201);
      const taskId = (await submit('map-cancel', { count: 6, label: 'cow' })).body.task.id;
      await expect
        .poll(async () => (await stepOf(taskId, 'detect'))?.waitingFor?.running, { timeout: 15_000 })
        .toBe(2);
      const cancelled = await h.request('POST', `/v1/tasks/${taskId}:cancel`, {
        token: app.apiKey,
        body: {},
      });
      expect(cancelled.status).toBeLessThan(300);
      // The map step and its items are cancelled at once; the execution ends after its grace period.
      const step = await stepOf(taskId, 'detect');
      expect(step.status).toBe('CANCELLED');
      expect(step.waitingFor).toBeNull();
      h.clock.advance(30_100);
      await endOf(taskId, 'CANCELLED');
      const items = await sql`
        SELECT status, count(*)::int AS n FROM map_item WHERE step_id = (
          SELECT id FROM step WHERE task_id = ${taskId} AND step_key = 'detect') GROUP BY status`;
      expect(items.map((r) => [r.status, r.n])).toEqual([['CANCELLED', 6]]);
      const unrevoked = await sql`
        SELECT count(*)::int AS n FROM attempt WHERE task_id = ${taskId} AND revoked_at IS NULL`;
      expect(unrevoked[0]!.n).toBe(0);
      // The workers of the two running items are told to stop them (at their stream's next read).
      const running = starts.filter((c) => c.taskId === taskId).map((c) => c.attemptId);
      expect(running).toHaveLength(2);
      await expect
        .poll(() => running.every((id) => cancelsSeen.includes(id)), { timeout: 10_000 })
        .toBe(true);
    } finally {
      gate = null;
      open();
    }
  });

  it('an item’s end does not wait for a scheduler round that holds the map’s request', async () => {
    // One slot for a map of two: the request stays due (waiting for a slot) while the first item runs.
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const gated = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-map-gated',
      capabilities: [{ name: 'map.gated', version: '1' }],
      maxConcurrency: 1,
      handler: async (command, report) => {
        if (command.input.n === 0) await held;
        await completeWith({ n: command.input.n })(command, report);
      },
    });
    workers.push(gated);
    expect(
      (
        await publish({
          name: 'map-held',
          version: '1',
          steps: [
            {
              key: 'each',
              kind: 'map',
              map: {
                items: '$.input.items',
                capability: 'map.gated',
                capabilityVersion: '1',
                inputMapping: { n: '$.item' },
                maxParallel: 2,
              },
            },
          ],
        })
      ).status,
    ).toBe(201);
    const taskId = (await submit('map-held', { items: [0, 1] })).body.task.id;
    const mapStep = async () =>
      (await sql`SELECT id FROM step WHERE task_id = ${taskId} AND step_key = 'each'`)[0]?.id as string;
    await expect
      .poll(async () => (await stepOf(taskId, 'each'))?.waitingFor?.running, { timeout: 15_000 })
      .toBe(1);
    const stepId = await mapStep();
    // A scheduler round's claim, as it holds the row until it has the task's lock and commits.
    const reserved = await sql.reserve();
    try {
      await reserved`BEGIN`;
      const claimed = await reserved`
        SELECT id FROM scheduling_request WHERE step_id = ${stepId} AND status = 'PENDING' FOR UPDATE`;
      expect(claimed).toHaveLength(1);
      release();
      // Item 0's end commits while the request is held (before, it waited for the row).
      await expect
        .poll(
          async () =>
            (await sql`SELECT status FROM map_item WHERE step_id = ${stepId} AND item_index = 0`)[0]?.status,
          { timeout: 5_000 },
        )
        .toBe('SUCCEEDED');
    } finally {
      await reserved`COMMIT`;
      reserved.release();
    }
    // The request was left due: the map places its last item and ends.
    await endOf(taskId, 'SUCCEEDED');
    expect((await stepOf(taskId, 'each')).data).toEqual([{ n: 0 }, { n: 1 }]);
  });

  it('an item attempt past the step’s startToCloseMs fails as timed out, its worker is told to stop, and it runs again', async () => {
    const cancels: string[] = [];
    const slow = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-map-slow',
      capabilities: [{ name: 'map.slow', version: '1' }],
      onCommand: (command) => {
        if (command.type === 'CANCEL_ATTEMPT') cancels.push(command.attemptId);
      },
      handler: async (command, report) => {
        if (command.input.n === 0 && command.attempt === 1) return; // never reports
        await completeWith({ n: command.input.n, attempt: command.attempt })(command, report);
      },
    });
    workers.push(slow);
    expect(
      (
        await publish({
          name: 'map-timeout',
          version: '1',
          steps: [
            {
              key: 'each',
              kind: 'map',
              failurePolicy: 'RETRY_THEN_FAIL_TASK',
              timeouts: { startToCloseMs: 10_000 },
              retry: { maxAttempts: 2, initialBackoffMs: 1, maxBackoffMs: 1, multiplier: 1 },
              map: {
                items: '$.input.items',
                capability: 'map.slow',
                capabilityVersion: '1',
                inputMapping: { n: '$.item' },
              },
            },
          ],
        })
      ).status,
    ).toBe(201);
    const taskId = (await submit('map-timeout', { items: [0, 1] })).body.task.id;
    await expect
      .poll(async () => (await stepOf(taskId, 'each'))?.waitingFor?.succeeded, { timeout: 15_000 })
      .toBe(1);
    const first = slow.received.find((c) => c.taskId === taskId && c.input.n === 0)!;
    h.clock.advance(10_100);
    await expect
      .poll(
        async () =>
          (
            await sql`SELECT status FROM map_item WHERE item_index = 0 AND step_id = (
              SELECT id FROM step WHERE task_id = ${taskId} AND step_key = 'each')`
          )[0]?.status,
        { timeout: 15_000 },
      )
      .toBe('WAITING_RETRY');
    // Its retry's back-off (1 ms) on the injected clock.
    h.clock.advance(10);
    await slow.heartbeat();
    await endOf(taskId, 'SUCCEEDED');
    // The CANCEL_ATTEMPT reaches the worker's stream at its next read of open commands.
    await expect.poll(() => cancels, { timeout: 10_000 }).toContain(first.attemptId);
    expect((await stepOf(taskId, 'each')).data).toEqual([
      { n: 0, attempt: 2 },
      { n: 1, attempt: 1 },
    ]);
  });

  it('fails the step with INPUT_MAPPING_FAILED naming the path when map.items is not an array', async () => {
    expect(
      (
        await publish({
          name: 'map-not-array',
          version: '1',
          steps: [
            {
              key: 'detect',
              kind: 'map',
              map: { items: '$.input.frames', capability: 'map.detect', capabilityVersion: '1' },
            },
          ],
        })
      ).status,
    ).toBe(201);
    const taskId = (await submit('map-not-array', { frames: 'not a list' })).body.task.id;
    await endOf(taskId, 'FAILED');
    const step = await stepOf(taskId, 'detect');
    expect(step.error.code).toBe('INPUT_MAPPING_FAILED');
    expect(step.error.userMessage).toContain('$.input.frames');
    expect(starts.some((c) => c.taskId === taskId)).toBe(false);
  });

  it('refuses at publish a map.items that is not an upstream reference, and $.item outside a map', async () => {
    const base = videoWorkflow('map-refused', {});
    const refusals: [unknown, string][] = [
      [
        {
          ...base,
          steps: base.steps.map((s) =>
            s.key === 'detect' ? { ...s, map: { ...(s as any).map, items: '$.item' } } : s,
          ),
        },
        '/steps/1/map/items',
      ],
      [
        {
          ...base,
          steps: base.steps.map((s) =>
            s.key === 'detect'
              ? { ...s, map: { ...(s as any).map, items: '$.steps.summary.output.list' } }
              : s,
          ),
        },
        '/steps/1/map/items',
      ],
      [
        {
          ...base,
          steps: base.steps.map((s) =>
            s.key === 'summary' ? { ...s, inputMapping: { detections: '$.item' } } : s,
          ),
        },
        '/steps/2/inputMapping/detections',
      ],
    ];
    for (const [body, path] of refusals) {
      const refused = await publish(body);
      expect(refused.status).toBe(422);
      expect(refused.body.code).toBe('WORKFLOW_DEFINITION_INVALID');
      expect(refused.body.errors.map((e: any) => e.path)).toContain(path);
    }
    expect(
      (await h.request('GET', '/v1/workflow-definitions/map-refused/versions/1', { token: app.apiKey }))
        .status,
    ).toBe(404);
  });
});
