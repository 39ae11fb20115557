/**
 * TDP's adapter for the PostgreSQL queue benchmark harness (hardbyte/postgresql-job-queue-benchmarking;
 * see README.md here). One process, as the harness kills only the pid it started: TDP's server on its own
 * thread, and on this one a worker of TDP's SDK running a one-step `noop` workflow, the producer, a depth
 * poller and the sampler.
 * Everything comes from the environment; stdout carries only the JSONL telemetry, logs go to stderr.
 *
 * Run: node --conditions=@tdp/source --import tsx bench/harness/tdpAdapter.ts (from the repo root).
 */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { pino } from 'pino';
import { guardProcess } from '../../packages/server/src/host/processGuard.ts';
import { emit, Limiter, newMeters, rateReader, startSampler } from './meter.ts';
import { depthReader, log, sleep, startNoopWorker, startServerThread, taskCreator } from './tdpSystem.ts';

const env = process.env;
const numberOf = (name: string, fallback: number) => {
  const value = Number(env[name]);
  return env[name] !== undefined && env[name] !== '' && Number.isFinite(value) ? value : fallback;
};
const databaseUrl = env.DATABASE_URL;
if (!databaseUrl) throw new Error('DATABASE_URL is required');
const instanceId = numberOf('BENCH_INSTANCE_ID', 0);
const everyS = numberOf('SAMPLE_EVERY_S', 5);
const mode = env.PRODUCER_MODE === 'depth-target' ? 'depth-target' : 'fixed';
const baseRate = numberOf('PRODUCER_RATE', 800);
const targetDepth = numberOf('TARGET_DEPTH', 1000);
const workerCount = Math.min(1000, Math.max(1, Math.round(numberOf('WORKER_COUNT', 32))));
const workMs = numberOf('JOB_WORK_MS', 1);
const payloadBytes = numberOf('JOB_PAYLOAD_BYTES', 256);
const batchMax = Math.max(1, numberOf('PRODUCER_BATCH_MAX', 128));
const batchMs = Math.max(1, numberOf('PRODUCER_BATCH_MS', 10));
/** Creates in flight at once: there is no batch create in TDP's API, so a batch is concurrent creates. */
const createConnections = Math.max(1, numberOf('TDP_PRODUCER_CONNECTIONS', 32));
const tokenPaced = env.PRODUCER_PACING !== 'adapter' && mode === 'fixed' && baseRate > 0;
const observer = instanceId === 0;
/** TDP's hot tables (most rows written per job), as the manifest next to this file lists them. */
const manifest = JSON.parse(readFileSync(new URL('./adapter.json', import.meta.url), 'utf8')) as {
  event_tables: string[];
  extensions: string[];
};

// The server migrates, starts and provisions on its own thread; a thread that ends unasked (its state
// unknown) ends the process, as the server's own process guard would have.
const server = await startServerThread({ databaseUrl, instanceId }, (code) => {
  log(`the server thread ended (code ${code}): exiting`);
  process.exit(code || 1);
});
// As `tdp server` does, for this thread's loops: a fault nothing handled (a connection lost mid-query)
// is logged, and the process goes on unless its state is unknown.
guardProcess({ logger: pino({ base: { src: 'tdp-adapter' } }, pino.destination(2)) });
const { apiKey, workerKey, schemaVersion } = server;
emit({
  kind: 'descriptor',
  system: 'tdp',
  event_tables: manifest.event_tables,
  extensions: manifest.extensions,
  version: `tdp@${server.version}`,
  schema_version: schemaVersion,
  db_name: new URL(databaseUrl).pathname.slice(1),
  started_at: new Date().toISOString(),
});

const meters = newMeters(baseRate);
const worker = startNoopWorker({
  url: server.url,
  key: workerKey,
  concurrency: workerCount,
  workMs,
  home: `tdp-harness-worker-${new URL(databaseUrl).pathname.slice(1)}-${instanceId}`,
  onStart: (sentAt) => meters.claim.add(Date.now() - sentAt),
  onDone: (sentAt) => {
    meters.endToEnd.add(Date.now() - sentAt);
    meters.completed += 1;
  },
});
const running = await worker.started;
const creator = taskCreator(server.url, apiKey, createConnections, payloadBytes);
const limiter = new Limiter(createConnections * 2);
const depth = depthReader(databaseUrl);
const readRate = rateReader(env.PRODUCER_RATE_CONTROL_FILE, baseRate);
let stopping = false;

/** Errors are logged at most once a second (an outage fails every call), the loops go on. */
let lastErrorLog = 0;
const failed = (what: string, error: unknown) => {
  if (Date.now() - lastErrorLog < 1_000) return;
  lastErrorLog = Date.now();
  log(`${what}: ${(error as Error)?.message ?? error}`);
};

/** Starts one create (waiting for a free slot); counts it once committed. */
let lastFailureAt = 0;
const submit = (): Promise<void> =>
  limiter.run(async () => {
    const sentAt = Date.now();
    const t0 = performance.now();
    try {
      await creator.create(sentAt);
      meters.producer.add(performance.now() - t0);
      meters.enqueued += 1;
    } catch (error) {
      lastFailureAt = Date.now();
      failed('create', error);
    }
  });
const submitMany = async (n: number) => {
  for (let i = 0; i < n && !stopping; i += 1) await submit();
};
/** After a failed create the producer waits a little (PostgreSQL restarting, a backend killed). */
const backOff = async () => {
  if (Date.now() - lastFailureAt < 200) await sleep(200);
};

/** Fixed rate by the adapter itself: credit = rate × real elapsed time, the rate re-read as it goes. */
async function ownPacing() {
  let credit = 0;
  let last = performance.now();
  let rate = readRate();
  let rateReadAt = 0;
  while (!stopping) {
    const now = performance.now();
    if (now - rateReadAt >= 250) {
      rate = readRate();
      rateReadAt = now;
      meters.targetRate = rate;
    }
    credit += (rate * (now - last)) / 1000;
    last = now;
    const n = Math.min(Math.floor(credit), batchMax);
    if (n >= 1) {
      credit -= n;
      await submitMany(n);
      await backOff();
    } else await sleep(batchMs);
  }
}

/** `ENQUEUE <n>` tokens of the harness's pacer on stdin; its own pacing once stdin ends. */
async function harnessPacing() {
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (stopping) return;
    const match = /^ENQUEUE\s+(\d+)/.exec(line.trim());
    if (!match) continue;
    await submitMany(Math.min(Number(match[1]), batchMax));
    await backOff();
  }
  // The harness closes stdin just before its SIGTERM at the end of a run: only a pacer gone for good
  // hands the pacing over.
  await sleep(1_000);
  if (!stopping) {
    log('stdin closed: pacing the producer itself');
    await ownPacing();
  }
}

/** Keeps TARGET_DEPTH jobs waiting: each round tops the queue up by at most PRODUCER_BATCH_MAX. */
async function depthTarget() {
  while (!stopping) {
    try {
      const waiting = await depth.read();
      meters.depth = waiting;
      const n = Math.min(batchMax, targetDepth - waiting);
      if (n > 0) {
        await submitMany(n);
        await limiter.idle();
        await backOff();
      } else await sleep(batchMs);
    } catch (error) {
      failed('depth', error);
      await sleep(200);
    }
  }
}

async function pollDepth() {
  while (!stopping) {
    try {
      meters.depth = await depth.read();
    } catch (error) {
      failed('depth', error);
    }
    await sleep(250);
  }
}

const stopSampler = startSampler(meters, { system: 'tdp', instanceId, everyS, observer });
const loops = [
  mode === 'depth-target' ? depthTarget() : tokenPaced ? harnessPacing() : ownPacing(),
  ...(observer && mode === 'fixed' ? [pollDepth()] : []),
];
log(
  `running: ${mode}${tokenPaced ? ' (harness tokens)' : ''}, rate ${baseRate}/s, ${workerCount} slots, server ${server.url}`,
);

/** SIGTERM: the contract gives 5 s to exit 0; whatever is not done by 4 s is left. */
const shutdown = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  log(`${signal}: stopping`);
  setTimeout(() => {
    worker.removeHome();
    process.exit(0);
  }, 4_000).unref();
  stopSampler();
  process.stdin.destroy();
  await Promise.race([Promise.allSettled(loops), sleep(1_000)]);
  await Promise.allSettled([running.drain(), creator.close(), depth.close()]);
  await server.close();
  worker.removeHome();
  process.exit(0);
};
process.once('SIGTERM', () => void shutdown('SIGTERM'));
process.once('SIGINT', () => void shutdown('SIGINT'));
