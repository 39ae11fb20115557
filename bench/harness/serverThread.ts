/**
 * TDP's server (what `tdp server` runs) on a worker thread of the adapter's process, with what the
 * benchmark needs on it: the migrated database, a tenant, an application and its key, the one-step
 * `noop` workflow and a worker key. The thread has its own event loop, so the server's work does not
 * queue behind the SDK worker's and the producer's on the main thread (tdpSystem.ts starts it).
 */
import { createHash } from 'node:crypto';
import { writeSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { pino } from 'pino';
import { loadMigrations } from '../../packages/server/src/adapters/outbound/postgres/migrate.ts';
import {
  configFromEnv,
  connectDatabase,
  guardProcess,
  migrate,
  type RunningServer,
  serverVersion,
  startServer,
} from '../../packages/server/src/main.ts';
import { addBenchTenant, benchPost, benchRateLimits, noopWorkflow } from '../support.ts';

export interface ServerThreadData {
  databaseUrl: string;
  instanceId: number;
}

/** What the thread tells the main thread; the main thread sends only `{ kind: 'close' }`. */
export type ServerThreadMessage =
  | {
      kind: 'ready';
      url: string;
      apiKey: string;
      workerKey: string;
      schemaVersion: string;
      version: string;
    }
  | { kind: 'failed'; message: string }
  | { kind: 'closed' };

/** Straight to fd 2: a thread's process.stderr goes through the main thread, and may be lost at exit. */
const log = (message: string) => writeSync(2, `[tdp-adapter server] ${message}\n`);

/** Tries `action` until it succeeds (PostgreSQL may be restarting while the harness starts us). */
async function retrying<T>(what: string, action: () => Promise<T>, deadlineMs = 55_000): Promise<T> {
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
async function migrateDatabase(url: string): Promise<string> {
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
  return {
    TDP_HOST: '127.0.0.1',
    TDP_PORT: '0',
    TDP_GRPC_PORT: 'off',
    TDP_LOG_LEVEL: 'warn',
    TDP_ADMIN_TOKEN: `tdpadm_harness_${createHash('sha256').update(secret).digest('hex').slice(0, 32)}`,
    TDP_SECRET_KEYS: `harness:${secret}`,
    ...benchRateLimits,
    ...process.env,
    NATS_URL: process.env.TDP_NATS_URL ?? '',
    REDIS_URL: process.env.TDP_REDIS_URL ?? '',
    DATABASE_URL: databaseUrl,
  };
}

async function startTdpServer(databaseUrl: string): Promise<{ server: RunningServer; adminToken: string }> {
  const env = serverEnv(databaseUrl);
  const config = configFromEnv(env);
  // Logs go to stderr: stdout is the harness's telemetry.
  const logger = pino({ level: config.logLevel, base: { src: 'tdp-server' } }, pino.destination(2));
  return { server: await startServer(config, { logger }), adminToken: env.TDP_ADMIN_TOKEN! };
}

/**
 * A tenant and application of this process, the `noop` workflow on it and a worker key. Each start
 * makes its own (an API key is shown once, at creation): after a restart on the same database the
 * earlier tenant's queued tasks still run, on this process's worker (worker keys are not per tenant).
 */
async function provision(base: string, adminToken: string, instanceId: number) {
  const name = `harness-${instanceId}-${Date.now().toString(36)}-${process.pid}`;
  const { apiKey } = await addBenchTenant(base, adminToken, name);
  const workerKey = (await benchPost<{ key: string }>(base, '/admin/v1/worker-credentials', adminToken, {}))
    .key;
  await benchPost(base, '/v1/workflow-definitions', apiKey, noopWorkflow(['sentAt', 'padding']));
  return { apiKey, workerKey };
}

if (isMainThread || !parentPort)
  throw new Error('serverThread.ts runs on a worker thread (see tdpSystem.ts)');
const port = parentPort;
const { databaseUrl, instanceId } = workerData as ServerThreadData;
const send = (message: ServerThreadMessage) => port.postMessage(message);
try {
  const schemaVersion = await migrateDatabase(databaseUrl);
  const { server, adminToken } = await retrying('start server', () => startTdpServer(databaseUrl));
  // As `tdp server` does: a fault nothing handled (a connection lost mid-query) is logged, and the thread
  // goes on unless its state is unknown (then it ends, and the main thread ends the process).
  guardProcess({ logger: server.logger, onFault: (kind) => server.health.processFault(kind) });
  const keys = await retrying('provision', () => provision(server.url, adminToken, instanceId));
  port.on('message', (message: { kind: string }) => {
    if (message.kind !== 'close') return;
    server
      .close()
      .catch((error: unknown) => log(`close: ${(error as Error)?.message ?? error}`))
      .finally(() => send({ kind: 'closed' }));
  });
  send({ kind: 'ready', url: server.url, ...keys, schemaVersion, version: serverVersion });
} catch (error) {
  send({ kind: 'failed', message: (error as Error)?.message ?? String(error) });
  process.exit(1);
}
