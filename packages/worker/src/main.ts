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
 *   TDP_WORKER_HEALTH_PORT  serve GET /healthz and /readyz on this port (default: no endpoint)
 *   TDP_WORKER_TRANSPORT    how events and attempt heartbeats are reported: `rest` (default) or `grpc`
 *   TDP_GRPC_URL            with grpc: the server's gRPC address, host:port (default: the port the server
 *                           announces at registration, on TDP_URL's host)
 *
 * Programs of their own use `startWorker()` from `@tdp/worker` (start.ts); this is its environment form.
 */

import { builtinCapabilities } from './capabilities/index.ts';
import { jsonLogger, type Logger } from './options.ts';
import type { Capability } from './sdk.ts';
import { type RunningWorker, startWorker, WorkerConfigError, withCapabilityLimits } from './start.ts';

export { jsonLogger } from './options.ts';
export { type RunningWorker, WorkerConfigError, withCapabilityLimits } from './start.ts';

/** The worker as `tdp worker` runs it: options from the environment; the caller handles signals. */
export async function startWorkerFromEnv(
  env: NodeJS.ProcessEnv,
  capabilities: Capability[] = builtinCapabilities,
  logger: Logger = jsonLogger,
): Promise<RunningWorker> {
  const key = env.TDP_WORKER_KEY;
  if (!key?.startsWith('tdpw_'))
    throw new WorkerConfigError('TDP_WORKER_KEY is required (a worker key, tdpw_…)');
  const concurrency = env.TDP_WORKER_CONCURRENCY ? Number(env.TDP_WORKER_CONCURRENCY) : undefined;
  if (concurrency !== undefined && !isConcurrency(concurrency))
    throw new WorkerConfigError(
      `TDP_WORKER_CONCURRENCY must be an integer from 1 to 1000, got "${env.TDP_WORKER_CONCURRENCY}"`,
    );
  const healthPort = env.TDP_WORKER_HEALTH_PORT ? Number(env.TDP_WORKER_HEALTH_PORT) : undefined;
  if (healthPort !== undefined && !(Number.isInteger(healthPort) && healthPort >= 0 && healthPort < 65536))
    throw new WorkerConfigError(`TDP_WORKER_HEALTH_PORT must be a port, got "${env.TDP_WORKER_HEALTH_PORT}"`);
  const transport = env.TDP_WORKER_TRANSPORT?.trim();
  if (transport && transport !== 'rest' && transport !== 'grpc')
    throw new WorkerConfigError(`TDP_WORKER_TRANSPORT must be rest or grpc, got "${transport}"`);
  try {
    return await startWorker({
      url: env.TDP_URL ?? 'http://127.0.0.1:8080',
      key,
      capabilities: withCapabilityLimits(capabilities, env.TDP_WORKER_CAPABILITY_CONCURRENCY),
      database: env.TDP_WORKER_DB ?? '.tdp/worker.db',
      handleSignals: false,
      logger,
      ...(concurrency ? { concurrency } : {}),
      ...(healthPort !== undefined ? { healthPort } : {}),
      ...(env.TDP_NODE_ID ? { nodeId: env.TDP_NODE_ID } : {}),
      ...(env.TDP_WORKER_NAME ? { name: env.TDP_WORKER_NAME } : {}),
      ...(transport ? { transport: transport as 'rest' | 'grpc' } : {}),
      ...(env.TDP_GRPC_URL?.trim() ? { grpcUrl: env.TDP_GRPC_URL.trim() } : {}),
    });
  } catch (error) {
    if (error instanceof WorkerConfigError && error.message.startsWith('url '))
      throw new WorkerConfigError('TDP_URL must be one URL or several separated by commas');
    throw error;
  }
}

const isConcurrency = (n: number) => Number.isInteger(n) && n >= 1 && n <= 1000;
