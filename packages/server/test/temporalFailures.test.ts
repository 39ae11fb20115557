/**
 * The Temporal engine when things go wrong and when the DAG is wide, with a real Temporal dev server (on
 * a SQLite file, so it can be restarted) and a real NATS JetStream: a wide fan-out, a worker process
 * killed with SIGKILL mid-step, the Temporal server itself killed and restarted mid-run, one that
 * lost every workflow (in memory) recovered by the sweep, and one that stops answering.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { advanceBeating, type KillableWorker, spawnWorkerProcess } from '../../../test/killableWorker.ts';
import { requireNats } from '../../../test/nats.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { onTemporal, requireTemporal, startTemporal, type TemporalProcess } from '../../../test/temporal.ts';
import { completeWith, startTestWorker } from '../../../test/testWorker.ts';
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
  workerHoldingFirst,
} from './engineRuns.ts';

const natsAnswers = await requireNats();
const binary = requireTemporal();

const width = 24;
const definitions = [
  {
    name: 'fan-out',
    version: '1',
    steps: [
      step('split'),
      ...Array.from({ length: width }, (_, i) => step(`part${i}`, ['split'])),
      step(
        'join',
        Array.from({ length: width }, (_, i) => `part${i}`),
      ),
    ],
  },
  {
    name: 'chain',
    version: '1',
    steps: [step('first'), step('second', ['first'])],
  },
  {
    name: 'slow',
    version: '1',
    steps: [
      step('only', [], {
        capability: 'engine.slow',
        retry: { maxAttempts: 3, initialBackoffMs: 300, maxBackoffMs: 1_000, multiplier: 2 },
      }),
    ],
  },
];

let directory: string;
let port: number;
let temporal: TemporalProcess;
let h: Harness;
let temporalClient: Client;
let sql: ReturnType<typeof connectDatabase>;
const killable: KillableWorker[] = [];

const startOurTemporal = () => startTemporal(binary!, { port, dbFile: join(directory, 'temporal.db') });

beforeAll(async () => {
  if (!binary || !natsAnswers) return;
  directory = mkdtempSync(join(tmpdir(), 'tdp-temporal-'));
  port = await freePort();
  temporal = await startOurTemporal();
  h = await startHarness({ runLoops: true, ...onTemporal(temporal.address) });
  await prepare(h, definitions);
  temporalClient = new Client({ connection: await Connection.connect({ address: temporal.address }) });
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
}, 180_000);

afterAll(async () => {
  for (const w of killable) w.child.kill('SIGKILL');
  await sql?.end();
  await h?.close();
  await temporalClient?.connection.close();
  await temporal?.stop();
  if (directory) rmSync(directory, { recursive: true, force: true });
}, 60_000);

/** The one run of an execution's workflow id, as Temporal lists it (its visibility trails a moment). */
const runsOf = async (executionId: string, client: Client = temporalClient) => {
  const found: string[] = [];
  for await (const run of client.workflow.list({ query: `WorkflowId = '${executionId}'` }))
    found.push(run.status.name);
  return found;
};

describe.skipIf(!binary || !natsAnswers)('the Temporal engine under failure', () => {
  it(`runs a fan-out of ${width} parallel steps and their join, each step once`, async () => {
    let running = 0;
    let mostAtOnce = 0;
    const w = await worker(
      h,
      'wide',
      async (command, report) => {
        running += 1;
        mostAtOnce = Math.max(mostAtOnce, running);
        await new Promise((resolve) => setTimeout(resolve, 50));
        await completeWith({ ok: true })(command, report);
        running -= 1;
      },
      8,
    );
    try {
      const created = await submit(h, 'fan-out');
      const id = created.body.task.id as string;
      await finished(h, id, 90_000);
      const facts = await stepFacts(h, id);
      const completed = facts.filter((f) => f.startsWith('STEP_COMPLETED'));
      expect(completed).toHaveLength(width + 2);
      expect(new Set(completed).size).toBe(width + 2);
      // The join ran after every part, the split before all of them.
      expect(completed[0]).toBe('STEP_COMPLETED split#1');
      expect(completed.at(-1)).toBe('STEP_COMPLETED join#1');
      // More than one part ran at once: the workflow made the parts ready together.
      expect(mostAtOnce).toBeGreaterThan(1);
      await expect.poll(() => runsOf(created.body.execution.id), { timeout: 15_000 }).toEqual(['COMPLETED']);
    } finally {
      await w.stop();
    }
  }, 120_000);

  it('a worker killed with SIGKILL mid-step: the step runs again on another worker, one success', async () => {
    const dying = spawnWorkerProcess(h.url, apps.get(h)!.workerKey, 'node-dying', 'engine.slow');
    killable.push(dying);
    await dying.next(); // registered
    const created = await submit(h, 'slow');
    const id = created.body.task.id as string;
    const lost = (await dying.next()).started as { taskId: string; attempt: number };
    expect(lost).toMatchObject({ taskId: id, attempt: 1 });
    dying.child.kill('SIGKILL');
    await dying.exited;
    const starts: number[] = [];
    const surviving = await startTestWorker({
      baseUrl: h.url,
      workerKey: apps.get(h)!.workerKey,
      nodeId: 'node-surviving',
      capabilities: [{ name: 'engine.slow', version: '1' }],
      handler: async (command, report) => {
        starts.push(command.attempt);
        await completeWith({ done: true })(command, report);
      },
    });
    try {
      // Past the dead worker's heartbeat TTL: TDP's reaper fails its attempt (WORKER_LOST), the workflow
      // decides the retry and waits its back-off on a Temporal timer (TDP's clock stands still here).
      await advanceBeating(h.clock, 31_000, [surviving]);
      await finished(h, id);
      expect(starts).toEqual([2]);
      const facts = await stepFacts(h, id);
      expect(facts.filter((f) => f.startsWith('STEP_COMPLETED'))).toEqual(['STEP_COMPLETED only#2']);
      const timeline = (
        await h.request('GET', `/v1/tasks/${id}/timeline`, { token: apps.get(h)!.apiKey })
      ).body.items.map((m: { kind: string }) => m.kind);
      expect(timeline).toContain('WORKER_LOST');
      const [retryTimers] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM timer WHERE task_id = ${id} AND kind = 'RETRY_DUE'`;
      expect(retryTimers!.n).toBe(0);
    } finally {
      h.clock.set(new Date());
      await surviving.stop();
    }
  }, 120_000);

  it('the Temporal server killed mid-run and started again on its data: the run completes, in one workflow', async () => {
    const { worker: w, release } = await workerHoldingFirst(h, 'through-restart');
    try {
      const created = await submit(h, 'chain');
      const id = created.body.task.id as string;
      await expect
        .poll(async () => (await task(h, id)).execution.steps[0]?.status, { timeout: 30_000 })
        .toBe('RUNNING');
      await temporal.stop('SIGKILL');
      // The step ends while Temporal is away: TDP commits it, the bridge cannot signal and retries.
      release();
      await expect
        .poll(async () => (await task(h, id)).execution.steps[0]?.status, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      expect((await task(h, id)).execution.steps[1]?.status).toBe('WAITING');
      temporal = await startOurTemporal();
      await finished(h, id, 90_000);
      expect((await stepFacts(h, id)).filter((f) => f.startsWith('STEP_COMPLETED'))).toEqual([
        'STEP_COMPLETED first#1',
        'STEP_COMPLETED second#1',
      ]);
      await expect.poll(() => runsOf(created.body.execution.id), { timeout: 15_000 }).toEqual(['COMPLETED']);
    } finally {
      release();
      await w.stop();
    }
  }, 180_000);

  it('a Temporal that lost its workflows (in memory, restarted): the sweep starts the run again and it completes', async () => {
    const lossyPort = await freePort();
    let lossy = await startTemporal(binary!, { port: lossyPort });
    const lossyHarness = await startHarness({
      runLoops: true,
      ...onTemporal(lossy.address, { sweepIntervalMs: 500, sweepIdleMs: 0 }),
    });
    try {
      await prepare(lossyHarness, definitions);
      const held = await workerHoldingFirst(lossyHarness, 'lossy');
      try {
        const created = await submit(lossyHarness, 'chain');
        const id = created.body.task.id as string;
        await expect
          .poll(async () => (await task(lossyHarness, id)).execution.steps[0]?.status, { timeout: 30_000 })
          .toBe('RUNNING');
        // Gone with its workflows; the step's end happens meanwhile, and its signal finds no workflow.
        await lossy.stop('SIGKILL');
        held.release();
        lossy = await startTemporal(binary!, { port: lossyPort });
        await finished(lossyHarness, id, 90_000);
        expect((await stepFacts(lossyHarness, id)).filter((f) => f.startsWith('STEP_COMPLETED'))).toEqual([
          'STEP_COMPLETED first#1',
          'STEP_COMPLETED second#1',
        ]);
        const client = new Client({ connection: await Connection.connect({ address: lossy.address }) });
        try {
          // The run the sweep started adopted the execution: one run on the new server, completed.
          await expect
            .poll(() => runsOf(created.body.execution.id, client), { timeout: 15_000 })
            .toEqual(['COMPLETED']);
          await recordHistory(client, 'adopted', created.body.execution.id);
        } finally {
          await client.connection.close();
        }
      } finally {
        held.release();
        await held.worker.stop();
      }
    } finally {
      await lossyHarness.close();
      await lossy.stop();
    }
  }, 180_000);

  it('a Temporal that stops answering (its connections frozen) leaves the API serving; once it answers, each task runs once', async () => {
    const upstream = await startTemporal(binary!);
    const proxy = new TcpProxy('127.0.0.1', Number(upstream.address.split(':')[1]));
    const proxyPort = await proxy.start();
    // The harness's pool has 10 connections; the bridge takes 32 events at once. A bridge that held a
    // transaction across each hanging call to Temporal would hold all ten, and every request would wait.
    const frozen = await startHarness({
      runLoops: true,
      ...onTemporal(`127.0.0.1:${proxyPort}`),
      requestDeadlineMs: 5_000,
    });
    try {
      await prepare(frozen, definitions);
      const w = await worker(frozen, 'frozen', completeWith({ ok: true }), 4);
      try {
        // Connected: a task runs through first.
        const first = await submit(frozen, 'chain');
        await finished(frozen, first.body.task.id);
        proxy.freeze({ newConnections: true });
        const ids: string[] = [];
        for (let i = 0; i < 16; i += 1) {
          const created = await submit(frozen, 'chain');
          expect(created.status).toBe(201);
          ids.push(created.body.task.id);
        }
        // The bridge has them all in hand by now, each call to Temporal hanging; the API still answers.
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        for (const id of ids) expect((await task(frozen, id)).execution.steps[0].status).toBe('WAITING');
        expect((await submit(frozen, 'chain')).status).toBe(201);
        // Temporal answers again: the hanging calls fail, their events come back, each starts one run.
        await proxy.cut();
        proxy.thaw();
        await proxy.restore();
        for (const id of ids) await finished(frozen, id, 120_000);
        for (const id of ids)
          expect((await stepFacts(frozen, id)).filter((f) => f.startsWith('STEP_COMPLETED'))).toEqual([
            'STEP_COMPLETED first#1',
            'STEP_COMPLETED second#1',
          ]);
      } finally {
        await w.stop();
      }
    } finally {
      await frozen.close();
      await proxy.cut();
      await upstream.stop();
    }
  }, 240_000);
});
