/**
 * Temporal as the engine (docs/temporal.md), with a real Temporal dev server and a real NATS JetStream:
 * the outbox publishes the execution's events, the bridge starts and signals the workflow, the workflow
 * decides with `advance` and TDP commits its decisions. The same DAGs as natively, compared step by step.
 */
import { newId } from '@tdp/protocol';
import { Client, Connection } from '@temporalio/client';
import { connect } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, loginToDashboard, screenshot } from '../../../test/browser.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { natsUrl, requireNats } from '../../../test/nats.ts';
import { onTemporal, requireTemporal, startTemporal, type TemporalProcess } from '../../../test/temporal.ts';
import {
  attemptEvent,
  completeWith,
  failFirstThenComplete,
  startTestWorker,
} from '../../../test/testWorker.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';
import { connectDatabase } from '../src/main.ts';
import {
  apps,
  finished,
  prepare,
  recordHistory,
  step,
  stepFacts,
  submit,
  task,
  worker,
} from './engineRuns.ts';

const natsAnswers = await requireNats();
const binary = requireTemporal();

let temporal: TemporalProcess;
/** The engine harness's subject prefix (its own stream, `<PREFIX>_EVENTS`). */
let prefix: string;
let engine: Harness;
let native: Harness;
let temporalClient: Client;
let sql: ReturnType<typeof connectDatabase>;
const definitions = [
  {
    name: 'diamond',
    version: '1',
    steps: [step('a'), step('b', ['a']), step('c', ['a']), step('d', ['b', 'c'])],
  },
  {
    name: 'nap',
    version: '1',
    steps: [{ key: 'nap', kind: 'sleep', sleep: { durationMs: 3_000 } }, step('after', ['nap'])],
  },
  {
    name: 'flaky',
    version: '1',
    steps: [
      step('only', [], {
        failurePolicy: 'RETRY_THEN_FAIL_TASK',
        retry: { maxAttempts: 3, initialBackoffMs: 300, maxBackoffMs: 1_000, multiplier: 2 },
      }),
    ],
  },
];

beforeAll(async () => {
  if (!binary || !natsAnswers) return;
  temporal = await startTemporal(binary);
  const options = onTemporal(temporal.address);
  prefix = options.nats.subjectPrefix;
  engine = await startHarness({ runLoops: true, ...options });
  native = await startHarness({ runLoops: true });
  await prepare(engine, definitions);
  await prepare(native, definitions);
  temporalClient = new Client({ connection: await Connection.connect({ address: temporal.address }) });
  sql = connectDatabase({ url: engine.databaseUrl, maxConnections: 1 });
}, 180_000);

afterAll(async () => {
  await sql?.end();
  await engine?.close();
  await native?.close();
  await temporalClient?.connection.close();
  await temporal?.stop();
}, 60_000);

describe.skipIf(!binary || !natsAnswers)('Temporal as the engine', () => {
  it('runs a diamond to SUCCEEDED through a Temporal workflow, with the step facts of a native run', async () => {
    const runs = [];
    for (const h of [engine, native]) {
      const w = await worker(h, `diamond-${h === engine ? 'temporal' : 'native'}`, async (command, report) =>
        completeWith({ ok: true })(command, report),
      );
      try {
        const created = await submit(h, 'diamond');
        expect(created.status).toBe(201);
        await finished(h, created.body.task.id);
        runs.push({
          h,
          id: created.body.task.id as string,
          executionId: created.body.execution.id as string,
        });
      } finally {
        await w.stop();
      }
    }
    const [viaTemporal, viaNative] = runs;
    const view = await task(engine, viaTemporal!.id);
    expect(view.execution.orchestration).toEqual({
      engine: 'temporal',
      workflowId: viaTemporal!.executionId,
    });
    expect((await task(native, viaNative!.id)).execution.orchestration).toEqual({
      engine: 'native',
      workflowId: null,
    });
    const timeline = (
      await engine.request('GET', `/v1/tasks/${viaTemporal!.id}/timeline`, {
        token: apps.get(engine)!.apiKey,
      })
    ).body.items;
    expect(timeline.find((m: { kind: string }) => m.kind === 'CREATED')).toMatchObject({
      data: { engine: 'temporal', workflowId: viaTemporal!.executionId },
    });
    expect(await stepFacts(engine, viaTemporal!.id)).toEqual(await stepFacts(native, viaNative!.id));
    // One workflow for the execution, and it completed.
    const described = await temporalClient.workflow.getHandle(viaTemporal!.executionId).describe();
    expect(described.status.name).toBe('COMPLETED');
    await recordHistory(temporalClient, 'diamond', viaTemporal!.executionId);
    // The decisions are TDP's facts, made by the Temporal engine.
    const [decisions] = await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM task_event
      WHERE task_id = ${viaTemporal!.id} AND type = 'ORCHESTRATION_DECIDED' AND producer = 'tdp:temporal'`;
    expect(decisions!.n).toBeGreaterThanOrEqual(4);
  }, 120_000);

  it('a create delivered again after a crash before its ack starts no second workflow and decides nothing', async () => {
    const w = await worker(engine, 'again-temporal', completeWith({ ok: true }));
    try {
      const created = await submit(engine, 'diamond');
      const id = created.body.task.id as string;
      await finished(engine, id);
      const eventsBefore = await stepFacts(engine, id);
      const handle = temporalClient.workflow.getHandle(created.body.execution.id);
      const firstRun = (await handle.describe()).runId;
      const [createdEvent] = await sql<
        { id: string; payload: unknown; tenant_id: string; application_id: string }[]
      >`
        SELECT id, payload, tenant_id, application_id FROM outbox_event
        WHERE aggregate_id = ${id} AND event_type = 'TASK_CREATED'`;
      // As if the bridge died after Temporal accepted the start and before its inbox row and ack
      // committed: no inbox row, and JetStream hands the message out again (a new message id here, since
      // JetStream itself would drop the same one within its duplicate window).
      await sql`DELETE FROM consumer_inbox WHERE consumer = 'tdp-temporal-bridge' AND event_id = ${createdEvent!.id}`;
      // Temporal refuses any start of a workflow id within a second of its last run's close
      // (workflowIdReuseMinimalInterval): past that, only the reuse policy stands in the way.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const nc = await connect({ servers: natsUrl });
      try {
        const subject = `${prefix}.${createdEvent!.tenant_id}.${createdEvent!.application_id}.events.TASK_CREATED`;
        await nc.jetstream().publish(subject, JSON.stringify(createdEvent!.payload), { msgID: newId() });
      } finally {
        await nc.close();
      }
      // The bridge took it again (its inbox row is back) and Temporal refused a second run.
      await expect
        .poll(
          async () =>
            (
              await sql`SELECT 1 FROM consumer_inbox
                        WHERE consumer = 'tdp-temporal-bridge' AND event_id = ${createdEvent!.id}`
            ).length,
          { timeout: 20_000 },
        )
        .toBe(1);
      // The latest run of the workflow id is still the first (a second start would be the latest).
      expect((await handle.describe()).runId).toBe(firstRun);
      expect(await stepFacts(engine, id)).toEqual(eventsBefore);
    } finally {
      await w.stop();
    }
  }, 120_000);

  it("retries a retryable failure on Temporal's timer, not TDP's", async () => {
    let calls = 0;
    const w = await worker(
      engine,
      'flaky-temporal',
      failFirstThenComplete({ ok: true }, () => {
        calls += 1;
      }),
    );
    try {
      const created = await submit(engine, 'flaky');
      const id = created.body.task.id as string;
      // TDP's clock stands still in the harness: only Temporal's timer can end the back-off.
      await finished(engine, id);
      await recordHistory(temporalClient, 'retry', created.body.execution.id);
      expect(calls).toBe(2);
      expect((await task(engine, id)).execution.steps[0]).toMatchObject({ attempt: 2, status: 'SUCCEEDED' });
      const [timers] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM timer WHERE task_id = ${id} AND kind = 'RETRY_DUE'`;
      expect(timers!.n).toBe(0);
    } finally {
      await w.stop();
    }
  }, 120_000);

  it("sleeps a sleep step on Temporal's timer, not TDP's", async () => {
    const w = await worker(engine, 'nap-temporal', completeWith({ ok: true }));
    try {
      // TDP's clock (it stands still in the harness: only Temporal's timer can wake the step) set to now,
      // so the sleep's end TDP computes is about 3 s of Temporal's time away.
      engine.clock.set(new Date());
      const created = await submit(engine, 'nap');
      const id = created.body.task.id as string;
      await finished(engine, id);
      await recordHistory(temporalClient, 'sleep', created.body.execution.id);
      const view = await task(engine, id);
      expect(
        view.execution.steps.map((s: { key: string; status: string }) => `${s.key} ${s.status}`),
      ).toEqual(['nap SUCCEEDED', 'after SUCCEEDED']);
      const [timers] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM timer WHERE task_id = ${id} AND kind = 'SLEEP_DUE'`;
      expect(timers!.n).toBe(0);
      // The workflow's history has the timer, and it fired at the step's end as TDP computed it.
      const history = await temporalClient.workflow.getHandle(created.body.execution.id).fetchHistory();
      expect(history.events!.filter((e) => e.timerStartedEventAttributes)).toHaveLength(1);
      const fired = history.events!.find((e) => e.timerFiredEventAttributes)!;
      const firedAt = Number(fired.eventTime!.seconds) * 1_000 + (fired.eventTime!.nanos ?? 0) / 1e6;
      const [waiting] = await sql<{ until: string }[]>`
        SELECT payload->'waitingFor'->>'until' AS until FROM task_event
        WHERE task_id = ${id} AND type = 'STEP_WAITING'`;
      expect(firedAt).toBeGreaterThanOrEqual(Date.parse(waiting!.until));
      expect(await stepFacts(engine, id)).toEqual([
        'TASK_CREATED',
        'STEP_WAITING nap#1',
        'STEP_COMPLETED nap#1',
        'STEP_DISPATCHED after#1',
        'STEP_STARTED after#1',
        'STEP_COMPLETED after#1',
        'TASK_COMPLETED',
      ]);
    } finally {
      await w.stop();
    }
  }, 120_000);

  it('cancels a running task: CANCEL_ATTEMPT to its worker, CANCELLED, and its workflow cancelled', async () => {
    const cancels: string[] = [];
    const w = await startTestWorker({
      baseUrl: engine.url,
      workerKey: apps.get(engine)!.workerKey,
      nodeId: 'cancel-temporal',
      capabilities: [{ name: 'engine.op', version: '1' }],
      handler: async (command, report) => {
        await report([{ ...attemptEvent(command, 'STEP_STARTED', 1) }]);
      },
      onCommand: (command) => {
        if (command.type === 'CANCEL_ATTEMPT') cancels.push(command.attemptId);
      },
    });
    try {
      const created = await submit(engine, 'diamond');
      const id = created.body.task.id as string;
      await expect
        .poll(async () => (await task(engine, id)).execution.steps[0]?.status, { timeout: 30_000 })
        .toBe('RUNNING');
      const cancelled = await engine.request('POST', `/v1/tasks/${id}:cancel`, {
        token: apps.get(engine)!.apiKey,
        body: { reason: 'changed my mind' },
      });
      expect(cancelled.body.execution.status).toBe('CANCELLING');
      const started = w.received.find((c) => c.taskId === id)!;
      await expect.poll(() => cancels, { timeout: 10_000 }).toContain(started.attemptId);
      await w.report([
        attemptEvent(started, 'STEP_FAILED', 2, {
          error: { category: 'CANCELLED', code: 'CANCELLED', retryable: false },
        }),
      ]);
      await expect
        .poll(async () => (await task(engine, id)).execution.status, { timeout: 10_000 })
        .toBe('CANCELLED');
      const handle = temporalClient.workflow.getHandle(created.body.execution.id);
      await expect
        .poll(async () => (await handle.describe()).status.name, { timeout: 20_000 })
        .toBe('CANCELLED');
      await recordHistory(temporalClient, 'cancel', created.body.execution.id);
      // Nothing else was decided for it: b, c and d never became ready.
      expect(
        (await task(engine, id)).execution.steps.slice(1).map((s: { status: string }) => s.status),
      ).toEqual(['CANCELLED', 'CANCELLED', 'CANCELLED']);
    } finally {
      await w.stop();
    }
  }, 120_000);

  it('creates tasks while Temporal is down (the health page shows the bridge backlog); once it is up, each runs in one workflow', async () => {
    const port = await freePort();
    const h = await startHarness({ runLoops: true, ...onTemporal(`127.0.0.1:${port}`) });
    let late: TemporalProcess | null = null;
    try {
      await prepare(h, definitions);
      const created = await submit(h, 'diamond');
      expect(created.status).toBe(201);
      const id = created.body.task.id as string;
      expect((await task(h, id)).execution.steps.map((s: { status: string }) => s.status)).toEqual([
        'WAITING',
        'WAITING',
        'WAITING',
        'WAITING',
      ]);
      // The health page shows what waits for Temporal, and that this replica cannot reach it.
      const browser = await launchBrowser();
      try {
        const page = await loginToDashboard(browser, h.url, h.adminToken);
        await page.goto(`${h.url}/dashboard/#/health`);
        const card = page.locator('[data-bridge-connected]');
        await expect
          .poll(() => card.getAttribute('data-bridge-connected'), { timeout: 15_000 })
          .toBe('false');
        expect(Number(await card.getAttribute('data-bridge-waiting'))).toBeGreaterThanOrEqual(1);
        await expect(card.textContent()).resolves.toContain('Temporal not reachable');
        late = await startTemporal(binary!, { port });
        const w = await worker(h, 'late', completeWith({ ok: true }));
        try {
          await finished(h, id);
        } finally {
          await w.stop();
        }
        // Once connected, the bridge works its backlog off: nothing waits (the page polls every 2 s).
        await expect.poll(() => card.getAttribute('data-bridge-connected'), { timeout: 15_000 }).toBe('true');
        await expect.poll(() => card.getAttribute('data-bridge-waiting'), { timeout: 15_000 }).toBe('0');
        await screenshot(page, 'dashboard-temporal-bridge');
      } finally {
        await browser.close();
      }
      const client = new Client({ connection: await Connection.connect({ address: late.address }) });
      try {
        // Visibility (the list) trails the workflow's own state by a moment: one run, and it completed.
        const runs = async () => {
          const found: string[] = [];
          for await (const run of client.workflow.list({
            query: `WorkflowId = '${created.body.execution.id}'`,
          }))
            found.push(run.status.name);
          return found;
        };
        await expect.poll(runs, { timeout: 15_000 }).toEqual(['COMPLETED']);
      } finally {
        await client.connection.close();
      }
    } finally {
      await h.close();
      await late?.stop();
    }
  }, 180_000);
});
