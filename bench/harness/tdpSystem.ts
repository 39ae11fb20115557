/**
 * TDP inside the adapter's process: the server (what `tdp server` runs), what the benchmark needs on it
 * (a tenant, an application and its key, the one-step `noop` workflow, a worker key), a worker of TDP's
 * SDK running the `noop` capability, and the producer's one call, `POST /v1/tasks`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Type } from 'typebox';
import { Pool } from 'undici';
import { loadMigrations } from '../../packages/server/src/adapters/outbound/postgres/migrate.ts';
import {
  configFromEnv,
  connectDatabase,
  migrate,
  type RunningServer,
  startServer,
} from '../../packages/server/src/main.ts';
import { defineCapability, type Logger, startWorker } from '../../packages/worker/src/index.ts';
import { noopWorkflow } from '../support.ts';

export const log = (message: string) => process.stderr.write(`[tdp-adapter] ${message}\n`);
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Tries `action` until it succeeds (PostgreSQL may be restarting while the harness starts us). */
export async function retrying<T>(what: string, action: () => Promise<T>, deadlineMs = 55_000): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      return await action();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      log(`${what}: ${(error as Error).message}; retrying`);
      await sleep(500);
    }
  }
}

/** Migrates DATABASE_URL (the harness created it); the schema version is the newest migration's name. */
export async function migrateDatabase(url: string): Promise<string> {
  await retrying('migrate', async () => {
    const sql = connectDatabase({ url, maxConnections: 1 });
    try {
      await migrate(sql);
    } finally {
      await sql.end({ timeout: 1 });
    }
  });
  return (await loadMigrations()).at(-1)?.name ?? 'unknown';
}

/**
 * The server's settings as `tdp server` reads them, with what a benchmark on loopback needs: a free
 * port, no gRPC, no NATS or Redis, the rate limits far above any rate reached (their cost stays in).
 * A TDP_* variable of the environment wins (to tune the pool, say). The keyring and admin token are
 * the same in every process on the database: replicas and restarts share it.
 */
function serverEnv(databaseUrl: string): NodeJS.ProcessEnv {
  const secret = createHash('sha256').update(`tdp-harness:${databaseUrl}`).digest('base64');
  const limits = Object.fromEntries(
    ['APPLICATION', 'WORKER', 'EXECUTION'].flatMap((credential) => [
      [`TDP_RATE_LIMIT_${credential}_PER_SECOND`, '1000000'],
      [`TDP_RATE_LIMIT_${credential}_BURST`, '1000000'],
    ]),
  );
  return {
    TDP_HOST: '127.0.0.1',
    TDP_PORT: '0',
    TDP_GRPC_PORT: 'off',
    TDP_LOG_LEVEL: 'warn',
    TDP_ADMIN_TOKEN: `tdpadm_harness_${createHash('sha256').update(secret).digest('hex').slice(0, 32)}`,
    TDP_SECRET_KEYS: `harness:${secret}`,
    ...limits,
    ...process.env,
    NATS_URL: process.env.TDP_NATS_URL ?? '',
    REDIS_URL: process.env.TDP_REDIS_URL ?? '',
    DATABASE_URL: databaseUrl,
  };
}

export async function startTdpServer(
  databaseUrl: string,
): Promise<{ server: RunningServer; adminToken: string }> {
  const env = serverEnv(databaseUrl);
  const config = configFromEnv(env);
  // Logs go to stderr: stdout is the harness's telemetry.
  const logger = pino({ level: config.logLevel, base: { src: 'tdp-server' } }, pino.destination(2));
  return { server: await startServer(config, { logger }), adminToken: env.TDP_ADMIN_TOKEN! };
}

export interface Provisioned {
  apiKey: string;
  workerKey: string;
}

/**
 * A tenant and application of this process, the `noop` workflow on it and a worker key. Each start
 * makes its own (an API key is shown once, at creation): after a restart on the same database the
 * earlier tenant's queued tasks still run, on this process's worker (worker keys are not per tenant).
 */
export async function provision(base: string, adminToken: string, instanceId: number): Promise<Provisioned> {
  const post = async <T>(path: string, key: string, body: unknown): Promise<T> => {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    if (!response.ok) throw new Error(`POST ${path} answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as T;
  };
  const name = `harness-${instanceId}-${Date.now().toString(36)}-${process.pid}`;
  const tenant = await post<{ id: string }>('/admin/v1/tenants', adminToken, { name });
  const app = await post<{ apiKey: { key: string } }>(
    `/admin/v1/tenants/${tenant.id}/applications`,
    adminToken,
    { name: 'bench' },
  );
  const workerKey = (await post<{ key: string }>('/admin/v1/worker-credentials', adminToken, {})).key;
  await post('/v1/workflow-definitions', app.apiKey.key, noopWorkflow(['sentAt', 'padding']));
  return { apiKey: app.apiKey.key, workerKey };
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
          input: { sentAt, seq, padding },
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
