/**
 * A worker process for `bench -- e2e`, one per system: `tdp`, `graphile` or `pgboss`. It runs no-op jobs,
 * measures submit → start latency from the `sentAt` in each payload, and reports counts and latencies
 * to the parent over IPC.
 *
 * The fairness bench gives its workers a fixed capacity: BENCH_WORKER_SLOTS jobs at once per process,
 * each taking BENCH_WORKER_WORK_MS, and tags its jobs (`tag` in the payload: the tenant it stands for);
 * the worker then also reports latencies and completions per tag.
 */
import { Pool } from 'undici';
import { newId } from '../packages/protocol/src/ids.ts';
import { sseEvents } from '../packages/worker/src/sse.ts';

const [system, target, secret] = process.argv.slice(2) as ['tdp' | 'graphile' | 'pgboss', string, string];
/** A fixed capacity (the fairness bench), else each system's own settings for the e2e bench. */
const slots = Number(process.env.BENCH_WORKER_SLOTS ?? 0) || null;
const workMs = Number(process.env.BENCH_WORKER_WORK_MS ?? 0);
const work = () => (workMs > 0 ? new Promise((r) => setTimeout(r, workMs)) : Promise.resolve());

interface Job {
  sentAt?: number;
  tag?: string;
}
let handled = 0;
let latencies: number[] = [];
let tagged: Record<string, number[]> = {};
const completed: Record<string, number> = {};
const started = ({ sentAt, tag }: Job) => {
  handled += 1;
  if (typeof sentAt !== 'number') return;
  latencies.push(Date.now() - sentAt);
  if (!tag) return;
  const ofTag = tagged[tag] ?? [];
  ofTag.push(Date.now() - sentAt);
  tagged[tag] = ofTag;
};
const finished = ({ tag }: Job) => {
  if (tag) completed[tag] = (completed[tag] ?? 0) + 1;
};

process.on('message', (message: { type: string }) => {
  if (message.type === 'report') {
    process.send?.({ type: 'report', handled, latencies, tagged });
    latencies = [];
    tagged = {};
  }
});
setInterval(() => process.send?.({ type: 'count', handled, completed }), 100).unref();

async function runTdp() {
  const headers = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' };
  const registered = (await (
    await fetch(`${target}/v1/workers/register`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        instanceId: newId(),
        name: `bench-${process.pid}`,
        nodeId: `node-${process.pid}`,
        capabilities: [{ name: 'noop', version: '1' }],
        maxConcurrency: slots ?? 256,
      }),
    })
  ).json()) as { workerId: string };
  const workerId = registered.workerId;
  setInterval(() => {
    void fetch(`${target}/v1/workers/${workerId}/heartbeat`, {
      method: 'POST',
      headers: { authorization: headers.authorization },
    }).catch(() => {});
  }, 5_000).unref();
  // Reports and acks are batched: one request for everything that happened in the last few ms, on
  // kept-alive connections (undici's pool costs far less CPU per request than fetch).
  const pool = new Pool(target, { connections: 2 });
  const post = async (path: string, body: unknown) => {
    const response = await pool.request({ method: 'POST', path, headers, body: JSON.stringify(body) });
    if (response.statusCode >= 300)
      process.stderr.write(
        `bench worker: ${path} answered ${response.statusCode}: ${await response.body.text()}\n`,
      );
    else await response.body.dump();
  };
  const events: Record<string, unknown>[] = [];
  const acks: string[] = [];
  const flush = async () => {
    // The acks ride along with the events: one request and one commit for both. A request carries at
    // most 500 events and 1,000 acks (a map's items can start hundreds at once).
    while (events.length > 0 || acks.length > 0) {
      const batch = events.splice(0, 500);
      const ackBatch = acks.splice(0, 1_000);
      await post(`/v1/workers/${workerId}/events:batch`, { events: batch, commandAcks: ackBatch });
    }
  };
  setInterval(() => void flush().catch(() => {}), 20).unref();
  const response = await fetch(`${target}/v1/workers/${workerId}/commands`, {
    headers: { authorization: headers.authorization },
  });
  const seen = new Set<string>();
  for await (const { data } of sseEvents(response.body!)) {
    const command = JSON.parse(data) as {
      commandId: string;
      type: string;
      attemptId: string;
      leaseVersion: number;
      input: Job;
    };
    if (seen.has(command.commandId)) continue;
    seen.add(command.commandId);
    acks.push(command.commandId);
    if (command.type !== 'START_ATTEMPT') continue;
    started(command.input);
    const attempt = { attemptId: command.attemptId, leaseVersion: command.leaseVersion };
    // Both events in one batch once the work is done: flushes run concurrently, and a STEP_STARTED
    // sent alone could arrive after its STEP_COMPLETED.
    void work().then(() => {
      finished(command.input);
      events.push(
        { ...attempt, eventId: newId(), eventType: 'STEP_STARTED', sourceSeq: 1 },
        { ...attempt, eventId: newId(), eventType: 'STEP_COMPLETED', sourceSeq: 2, output: {} },
      );
    });
  }
}

async function runGraphile() {
  const { run, Logger } = await import('graphile-worker');
  const { default: pg } = await import('pg');
  const pgPool = new pg.Pool({ connectionString: target, max: 20 });
  pgPool.on('error', () => {});
  pgPool.on('connect', (client) => client.on('error', () => {}));
  await run({
    pgPool,
    // Per-job INFO lines would cost graphile-worker time the other systems do not spend.
    logger: new Logger(() => (level, message) => {
      if (level === 'error') process.stderr.write(`graphile-worker: ${message}\n`);
    }),
    concurrency: slots ?? 16,
    noHandleSignals: true,
    pollInterval: 1000,
    taskList: {
      noop: async (payload) => {
        started(payload as Job);
        await work();
        finished(payload as Job);
      },
    },
  });
}

async function runPgBoss() {
  const { PgBoss } = await import('pg-boss');
  const boss = new PgBoss({ connectionString: target, useListenNotify: true, max: 10 });
  boss.on('error', () => {});
  await boss.start();
  await boss.work(
    'noop',
    // With a fixed capacity: batches of `slots` jobs run together, fetched back to back while they
    // come full (else a fetch waits for the next NOTIFY).
    slots
      ? { batchSize: slots, localConcurrency: 1, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 }
      : { batchSize: 50, localConcurrency: 4, pollingIntervalSeconds: 0.5 },
    async (jobs: { data: Job }[]) => {
      for (const job of jobs) started(job.data);
      await work();
      for (const job of jobs) finished(job.data);
    },
  );
}

const runners = { tdp: runTdp, graphile: runGraphile, pgboss: runPgBoss };
await runners[system]();
