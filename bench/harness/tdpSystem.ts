/**
 * TDP inside the adapter's process: the server on its own thread (serverThread.ts), a worker of TDP's
 * SDK running the `noop` capability, the producer's one call, `POST /v1/tasks`, and the depth gauge.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { Type } from 'typebox';
import { Pool } from 'undici';
// The database module alone: the main thread does not load the server (it runs on its own thread).
import { connectDatabase } from '../../packages/server/src/adapters/outbound/postgres/database.ts';
import { defineCapability, type Logger, startWorker } from '../../packages/worker/src/index.ts';
import type { ServerThreadData, ServerThreadMessage } from './serverThread.ts';

export const log = (message: string) => process.stderr.write(`[tdp-adapter] ${message}\n`);
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the main thread holds of the server thread (serverThread.ts): its URL, keys and shutdown. */
export interface ServerThread {
  url: string;
  apiKey: string;
  workerKey: string;
  schemaVersion: string;
  version: string;
  /** Closes the server (in-flight requests finish) and ends the thread. */
  close(): Promise<void>;
}

/**
 * Starts TDP's server on a worker thread of this process (a SIGKILL of the pid still ends it all) and
 * resolves once it serves, provisioned. `onLost` hears of the thread ending while not asked to close.
 * Node 20 gives a worker the parent's execArgv (`--conditions=@tdp/source` applies) but not the loader
 * hooks `--import tsx` registered: its `.ts` entry fails with ERR_UNKNOWN_FILE_EXTENSION. So a small
 * bootstrap registers tsx's loader on the thread first, then imports the entry.
 */
export function startServerThread(
  data: ServerThreadData,
  onLost: (code: number) => void,
): Promise<ServerThread> {
  const entry = new URL('./serverThread.ts', import.meta.url).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  const bootstrap = `import(${JSON.stringify(tsx)}).then(({ register }) => { register(); return import(${JSON.stringify(entry)}); });`;
  const thread = new Worker(bootstrap, {
    eval: true,
    workerData: data,
    execArgv: process.execArgv,
    stdout: true,
  });
  // Nothing of the server's belongs on stdout (the harness's JSONL): whatever it prints goes to stderr.
  thread.stdout.pipe(process.stderr);
  let ready = false;
  let closing = false;
  return new Promise((resolve, reject) => {
    thread.on('error', (error) => log(`server thread: ${error.stack ?? error.message}`));
    thread.on('exit', (code) => {
      if (!ready) reject(new Error(`the server thread ended (code ${code}) before it served`));
      else if (!closing) onLost(code);
    });
    thread.on('message', (message: ServerThreadMessage) => {
      if (message.kind === 'failed') reject(new Error(`server thread: ${message.message}`));
      if (message.kind !== 'ready') return;
      ready = true;
      const { kind: _, ...served } = message;
      resolve({
        ...served,
        close: () =>
          new Promise<void>((closed) => {
            closing = true;
            thread.once('exit', () => closed());
            thread.on('message', (m: ServerThreadMessage) => m.kind === 'closed' && closed());
            thread.postMessage({ kind: 'close' });
          }),
      });
    });
  });
}

/** The step's code: claim latency when it starts, the harness's JOB_WORK_MS, end-to-end when done. */
export function startNoopWorker(options: {
  url: string;
  key: string;
  concurrency: number;
  workMs: number;
  /** Names the worker's local files: a replica's own, left over by a predecessor the harness killed. */
  home: string;
  onStart(sentAt: number): void;
  onDone(sentAt: number): void;
}) {
  const noop = defineCapability({
    name: 'noop',
    version: '1',
    input: Type.Object({ sentAt: Type.Number(), padding: Type.Optional(Type.String()) }),
    output: Type.Object({}),
    run: async (_ctx, input) => {
      options.onStart(input.sentAt);
      if (options.workMs > 0) await sleep(options.workMs);
      options.onDone(input.sentAt);
      return {};
    },
  });
  // The worker is new at each start (it registers anew): a killed predecessor's files are dropped.
  const home = join(tmpdir(), options.home);
  rmSync(home, { recursive: true, force: true });
  mkdirSync(home, { recursive: true });
  const quiet: Logger = {
    info: () => {},
    warn: (fields, message) => log(`worker: ${message} ${JSON.stringify(fields)}`),
    error: (fields, message) => log(`worker: ${message} ${JSON.stringify(fields)}`),
  };
  const started = startWorker({
    url: options.url,
    key: options.key,
    capabilities: [noop],
    concurrency: options.concurrency,
    database: join(home, 'worker.db'),
    name: `harness-${process.pid}`,
    handleSignals: false,
    drainGraceMs: 2_000,
    logger: quiet,
  });
  return { started, removeHome: () => rmSync(home, { recursive: true, force: true }) };
}

/** Creates `noop` tasks over kept-alive connections. */
export function taskCreator(base: string, apiKey: string, connections: number, payloadBytes: number) {
  const pool = new Pool(base, { connections, pipelining: 1 });
  const run = randomBytes(6).toString('hex');
  const padding = 'x'.repeat(Math.max(0, payloadBytes));
  const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
  let seq = 0;
  return {
    /** Throws unless the task was committed (a refusal names its status and answer). */
    async create(sentAt: number): Promise<void> {
      seq += 1;
      const response = await pool.request({
        method: 'POST',
        path: '/v1/tasks',
        headers: { ...headers, 'idempotency-key': `${run}-${seq}` },
        body: JSON.stringify({
          workflowName: 'noop',
          workflowVersion: '1',
          name: `noop ${seq}`,
          input: { sentAt, padding },
        }),
        headersTimeout: 15_000,
        bodyTimeout: 15_000,
      });
      if (response.statusCode === 201 || response.statusCode === 200)
        return void (await response.body.dump());
      throw new Error(`POST /v1/tasks answered ${response.statusCode}: ${await response.body.text()}`);
    },
    close: () => pool.close(),
  };
}

/** Steps ready to run and not yet placed on a worker: TDP's available, unclaimed jobs. */
export function depthReader(url: string) {
  const sql = connectDatabase({ url, maxConnections: 1 });
  return {
    /** Fails after 5 s without an answer: a stale gauge would hide a stalled connection. */
    async read(): Promise<number> {
      let timer: NodeJS.Timeout | undefined;
      const query = sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM step WHERE status IN ('READY', 'QUEUED')`;
      try {
        const rows = await Promise.race([
          query,
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error('no answer within 5 s')), 5_000);
          }),
        ]);
        return rows[0]?.n ?? 0;
      } finally {
        clearTimeout(timer);
      }
    },
    close: () => sql.end({ timeout: 1 }),
  };
}
