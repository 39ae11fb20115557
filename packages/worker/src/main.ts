/**
 * `tdp worker`: the runtime with the built-in capabilities, configured from the environment.
 *
 *   TDP_URL                 the TDP server (default http://127.0.0.1:8080)
 *   TDP_WORKER_KEY          a worker key, tdpw_… (POST /admin/v1/worker-credentials) — required
 *   TDP_WORKER_DB           the local SQLite file (default ./.tdp/worker.db)
 *   TDP_WORKER_CONCURRENCY  attempts run at once (default: the number of CPUs)
 *   TDP_NODE_ID, TDP_WORKER_NAME  how the worker presents itself (default: the host name)
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { newId } from '@tdp/protocol';
import { builtinCapabilities } from './capabilities/index.ts';
import { WorkerClient } from './client.ts';
import { LocalStore } from './localStore.ts';
import { type Logger, WorkerRuntime } from './runtime.ts';
import type { Capability } from './sdk.ts';

export class WorkerConfigError extends Error {
  override name = 'WorkerConfigError';
}

/** One JSON line per message on stderr; never the worker key. */
export const jsonLogger: Logger = {
  info: (fields, message) => log('info', fields, message),
  warn: (fields, message) => log('warn', fields, message),
  error: (fields, message) => log('error', fields, message),
};

function log(level: string, fields: Record<string, unknown>, message: string): void {
  const err =
    fields.err instanceof Error ? { err: { message: fields.err.message, stack: fields.err.stack } } : {};
  process.stderr.write(
    `${JSON.stringify({ level, time: new Date().toISOString(), msg: message, ...fields, ...err })}\n`,
  );
}

export interface StartedWorker {
  runtime: WorkerRuntime;
  /** Drains (finishes or hands back running attempts) and closes the local database. */
  drain(): Promise<void>;
}

export async function startWorker(
  env: NodeJS.ProcessEnv,
  capabilities: Capability[] = builtinCapabilities,
  logger: Logger = jsonLogger,
): Promise<StartedWorker> {
  const key = env.TDP_WORKER_KEY;
  if (!key?.startsWith('tdpw_'))
    throw new WorkerConfigError('TDP_WORKER_KEY is required (a worker key, tdpw_…)');
  const concurrency = env.TDP_WORKER_CONCURRENCY ? Number(env.TDP_WORKER_CONCURRENCY) : undefined;
  if (concurrency !== undefined && !(Number.isInteger(concurrency) && concurrency > 0))
    throw new WorkerConfigError(
      `TDP_WORKER_CONCURRENCY must be a positive integer, got "${env.TDP_WORKER_CONCURRENCY}"`,
    );
  const dbPath = resolve(env.TDP_WORKER_DB ?? '.tdp/worker.db');
  mkdirSync(dirname(dbPath), { recursive: true });
  const store = new LocalStore(dbPath, newId);
  const client = new WorkerClient((env.TDP_URL ?? 'http://127.0.0.1:8080').replace(/\/$/, ''), key);
  const runtime = new WorkerRuntime({
    client,
    store,
    capabilities,
    ...(env.TDP_NODE_ID ? { nodeId: env.TDP_NODE_ID } : {}),
    ...(env.TDP_WORKER_NAME ? { name: env.TDP_WORKER_NAME } : {}),
    ...(concurrency ? { maxConcurrency: concurrency } : {}),
    logger,
  });
  await runtime.start();
  logger.info(
    { workerId: runtime.id, capabilities: capabilities.map((c) => `${c.name}@${c.version}`), db: dbPath },
    'worker ready',
  );
  return {
    runtime,
    drain: async () => {
      await runtime.drain();
      store.close();
      await client.close();
    },
  };
}
