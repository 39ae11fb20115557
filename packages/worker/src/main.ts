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
import {
  type RunningWorker,
  type StartWorkerOptions,
  startWorker,
  WorkerConfigError,
  withCapabilityLimits,
} from './start.ts';

export { jsonLogger } from './options.ts';
export { type RunningWorker, WorkerConfigError, withCapabilityLimits } from './start.ts';

/** The worker as `tdp worker` runs it: options from the environment; the caller handles signals. */
export async function startWorkerFromEnv(
  env: NodeJS.ProcessEnv,
  capabilities: Capability[] = builtinCapabilities,
  logger: Logger = jsonLogger,
): Promise<RunningWorker> {
  const number = (value: string | undefined) => (value?.trim() ? Number(value) : undefined);
  const transport = env.TDP_WORKER_TRANSPORT?.trim();
  const concurrency = number(env.TDP_WORKER_CONCURRENCY);
  const healthPort = number(env.TDP_WORKER_HEALTH_PORT);
  try {
    return await startWorker({
      url: env.TDP_URL ?? 'http://127.0.0.1:8080',
      key: env.TDP_WORKER_KEY ?? '',
      capabilities: withCapabilityLimits(capabilities, env.TDP_WORKER_CAPABILITY_CONCURRENCY),
      handleSignals: false,
      logger,
      ...(env.TDP_WORKER_DB ? { database: env.TDP_WORKER_DB } : {}),
      ...(concurrency !== undefined ? { concurrency } : {}),
      ...(healthPort !== undefined ? { healthPort } : {}),
      ...(env.TDP_NODE_ID ? { nodeId: env.TDP_NODE_ID } : {}),
      ...(env.TDP_WORKER_NAME ? { name: env.TDP_WORKER_NAME } : {}),
      ...(transport ? { transport: transport as 'rest' | 'grpc' } : {}),
      ...(env.TDP_GRPC_URL?.trim() ? { grpcUrl: env.TDP_GRPC_URL.trim() } : {}),
    });
  } catch (error) {
    // The same check, named by the variable that set the option.
    const variable = error instanceof WorkerConfigError && error.option && variables[error.option];
    if (variable) throw new WorkerConfigError(`${variable} ${error.message}`, error.option);
    throw error;
  }
}

const variables: Partial<Record<keyof StartWorkerOptions, string>> = {
  key: 'TDP_WORKER_KEY',
  url: 'TDP_URL',
  concurrency: 'TDP_WORKER_CONCURRENCY',
  healthPort: 'TDP_WORKER_HEALTH_PORT',
  transport: 'TDP_WORKER_TRANSPORT',
};
