/**
 * `tdp worker`: the runtime with the built-in capabilities, configured from the environment.
 *
 *   TDP_URL                 the TDP server (default http://127.0.0.1:8080), or several replicas separated
 *                           by commas: the worker moves to the next when the one it uses does not answer
 *   TDP_WORKER_KEY          a worker key, tdpw_… (POST /admin/v1/worker-credentials) — required
 *   TDP_WORKER_DB           the local SQLite file (default ./.tdp/worker.db)
 *   TDP_WORKER_CONCURRENCY  attempts run at once, all capabilities together (default 10)
 *   TDP_WORKER_CAPABILITY_CONCURRENCY  per capability, e.g. `archive.clean=2,image.watermark=1`
 *                           (default: the built-in capabilities, which are CPU-bound, the number of CPUs)
 *   TDP_NODE_ID, TDP_WORKER_NAME  how the worker presents itself (default: the host name)
 *   TDP_WORKER_TRANSPORT    how events and attempt heartbeats are reported: `rest` (default) or `grpc`
 *   TDP_GRPC_URL            with grpc: the server's gRPC address, host:port (default: the port the server
 *                           announces at registration, on TDP_URL's host)
 */

import { mkdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, resolve } from 'node:path';
import { newId } from '@tdp/protocol';
import { builtinCapabilities } from './capabilities/index.ts';
import { serverUrls, WorkerClient } from './client.ts';
import { GrpcReporting } from './grpcReporting.ts';
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

export type ReportingTransportName = 'rest' | 'grpc';

export async function startWorker(
  env: NodeJS.ProcessEnv,
  capabilities: Capability[] = builtinCapabilities,
  logger: Logger = jsonLogger,
  /** Over the environment's TDP_WORKER_TRANSPORT and TDP_GRPC_URL. */
  reportingOptions: { transport?: ReportingTransportName; grpcUrl?: string } = {},
): Promise<StartedWorker> {
  const key = env.TDP_WORKER_KEY;
  if (!key?.startsWith('tdpw_'))
    throw new WorkerConfigError('TDP_WORKER_KEY is required (a worker key, tdpw_…)');
  const concurrency = env.TDP_WORKER_CONCURRENCY ? Number(env.TDP_WORKER_CONCURRENCY) : undefined;
  if (concurrency !== undefined && !isConcurrency(concurrency))
    throw new WorkerConfigError(
      `TDP_WORKER_CONCURRENCY must be an integer from 1 to 1000, got "${env.TDP_WORKER_CONCURRENCY}"`,
    );
  const limited = withCapabilityLimits(capabilities, env.TDP_WORKER_CAPABILITY_CONCURRENCY);
  let urls: string[];
  try {
    urls = serverUrls(env.TDP_URL ?? 'http://127.0.0.1:8080');
  } catch {
    throw new WorkerConfigError(`TDP_URL must be one URL or several separated by commas`);
  }
  const dbPath = resolve(env.TDP_WORKER_DB ?? '.tdp/worker.db');
  mkdirSync(dirname(dbPath), { recursive: true });
  const store = new LocalStore(dbPath, newId);
  const transport = reportingOptions.transport ?? env.TDP_WORKER_TRANSPORT?.trim() ?? 'rest';
  if (transport !== 'rest' && transport !== 'grpc')
    throw new WorkerConfigError(`TDP_WORKER_TRANSPORT must be rest or grpc, got "${transport}"`);
  const client = new WorkerClient(urls, key);
  const grpcUrl = reportingOptions.grpcUrl ?? env.TDP_GRPC_URL?.trim();
  // Without an address, the port the server announced, on the host the worker reaches it by.
  const reporting =
    transport === 'grpc'
      ? new GrpcReporting(grpcUrl || (() => grpcAddressOf(client.server, runtime.grpcPort)), key)
      : undefined;
  const runtime: WorkerRuntime = new WorkerRuntime({
    client,
    ...(reporting ? { reporting } : {}),
    store,
    capabilities: limited,
    ...(env.TDP_NODE_ID ? { nodeId: env.TDP_NODE_ID } : {}),
    ...(env.TDP_WORKER_NAME ? { name: env.TDP_WORKER_NAME } : {}),
    ...(concurrency ? { maxConcurrency: concurrency } : {}),
    logger,
  });
  await runtime.start();
  logger.info(
    {
      workerId: runtime.id,
      capabilities: limited.map((c) => `${c.name}@${c.version}`),
      db: dbPath,
      server: client.server,
      transport,
    },
    'worker ready',
  );
  return {
    runtime,
    drain: async () => {
      await runtime.drain();
      store.close();
      reporting?.close();
      await client.close();
    },
  };
}

/** `host:port` of the gRPC reporting port on the host of a server URL. */
export function grpcAddressOf(serverUrl: string, port: number | null): string | null {
  if (!port) return null;
  const host = new URL(serverUrl).hostname;
  return `${host.includes(':') ? `[${host.replace(/^\[|\]$/g, '')}]` : host}:${port}`;
}

const isConcurrency = (n: number) => Number.isInteger(n) && n >= 1 && n <= 1000;

/**
 * Each capability's own limit: from `spec` (`name=n,…`), else its own declaration, else — for a
 * built-in capability, all CPU-bound (archives, images) — the number of CPUs.
 */
export function withCapabilityLimits(capabilities: Capability[], spec: string | undefined): Capability[] {
  const limits = new Map<string, number>();
  for (const item of (spec ?? '').split(',').filter((i) => i.trim() !== '')) {
    const [name, value] = item.split('=').map((part) => part.trim());
    const limit = Number(value);
    if (!name || !capabilities.some((c) => c.name === name) || !isConcurrency(limit))
      throw new WorkerConfigError(
        `TDP_WORKER_CAPABILITY_CONCURRENCY: "${item}" is not <capability of this worker>=<1 to 1000>`,
      );
    limits.set(name, limit);
  }
  return capabilities.map((c) => {
    const limit =
      limits.get(c.name) ??
      c.maxConcurrency ??
      (builtinCapabilities.includes(c) ? Math.max(1, availableParallelism()) : undefined);
    return limit === undefined ? c : { ...c, maxConcurrency: limit };
  });
}
