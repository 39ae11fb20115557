/**
 * `tdp worker`: the runtime with a capability module (the CLI's: the built-in capabilities of
 * `@tdp/capabilities`), configured from the environment.
 *
 *   TDP_URL                 the TDP server (default http://127.0.0.1:8080), or several replicas separated
 *                           by commas: the worker moves to the next when the one it uses does not answer
 *   TDP_WORKER_KEY          a worker key, tdpw_… (POST /admin/v1/worker-credentials) — required, unless
 *   TDP_WORKER_KEY_FILE     a file holding it: read at start, and again while TDP refuses the key (a
 *                           rotation: write the new key to the file, then revoke the old one)
 *   TDP_WORKER_DB           the local SQLite file (default ./.tdp/worker.db)
 *   TDP_WORKER_CONCURRENCY  attempts run at once, all capabilities together (default 10)
 *   TDP_WORKER_CAPABILITY_CONCURRENCY  per capability, e.g. `archive.clean=2,image.watermark=1`
 *                           (default: the built-in capabilities, which are CPU-bound, the number of CPUs)
 *   TDP_NODE_ID, TDP_WORKER_NAME  how the worker presents itself (default: the host name)
 *   TDP_WORKER_HEALTH_PORT  serve GET /healthz and /readyz on this port (default: no endpoint)
 *   TDP_WORKER_TRANSPORT    how events and attempt heartbeats are reported: `rest` (default) or `grpc`
 *   TDP_GRPC_URL            with grpc: the server's gRPC address, host:port (default: the port the server
 *                           announces at registration, on TDP_URL's host)
 *   TDP_EGRESS_ALLOW        what downloads and uploads may reach beyond public addresses: CIDRs and
 *                           host:port pairs, comma-separated (default none; TDP_URL's servers always)
 *   TDP_WORKER_MAX_DOWNLOAD_BYTES  a larger input file fails its step (default 1 GiB)
 *   TDP_WORKER_MEMORY_LIMIT_MB  each capability runner's memory (default 2048)
 *   TDP_WORKER_TIME_LIMIT_MS    each attempt's time before its runner is killed (default 3600000)
 *
 * Every attempt runs in a capability runner process (isolation/), never in the worker's own.
 *
 * Programs of their own use `startWorker()` from `@tdp/worker` (start.ts); this is its environment form.
 */

import { readFile } from 'node:fs/promises';
import { capabilitiesOf } from './isolation/capabilityModule.ts';
import { jsonLogger, type Logger } from './options.ts';
import {
  type RunningWorker,
  type StartWorkerOptions,
  startWorker,
  WorkerConfigError,
  withCapabilityLimits,
} from './start.ts';
import { otlpTracingConfigured } from './tracing.ts';

export { jsonLogger } from './options.ts';
export { type RunningWorker, WorkerConfigError, withCapabilityLimits } from './start.ts';

/**
 * The worker as `tdp worker` runs it: options from the environment; the caller handles signals. The
 * capabilities are a module's (isolated: each attempt in a runner process): `tdp worker` gives the
 * built-in ones' (`@tdp/capabilities`), which this package does not depend on.
 */
export async function startWorkerFromEnv(
  env: NodeJS.ProcessEnv,
  capabilityModule: string | URL,
  logger: Logger = jsonLogger,
): Promise<RunningWorker> {
  const number = (value: string | undefined) => (value?.trim() ? Number(value) : undefined);
  const transport = env.TDP_WORKER_TRANSPORT?.trim();
  const concurrency = number(env.TDP_WORKER_CONCURRENCY);
  const healthPort = number(env.TDP_WORKER_HEALTH_PORT);
  const maxDownloadBytes = number(env.TDP_WORKER_MAX_DOWNLOAD_BYTES);
  const memoryLimitMb = number(env.TDP_WORKER_MEMORY_LIMIT_MB);
  const timeLimitMs = number(env.TDP_WORKER_TIME_LIMIT_MS);
  const keyFile = env.TDP_WORKER_KEY_FILE?.trim();
  try {
    const capabilities = withCapabilityLimits(
      [...(await capabilitiesOf(capabilityModule)).values()],
      env.TDP_WORKER_CAPABILITY_CONCURRENCY,
    );
    const startKey = keyFile
      ? await readKeyFile(keyFile).catch(() => {
          throw new WorkerConfigError(`TDP_WORKER_KEY_FILE: cannot read ${keyFile}`);
        })
      : (env.TDP_WORKER_KEY ?? '');
    const worker = await startWorker({
      url: env.TDP_URL ?? 'http://127.0.0.1:8080',
      key: startKey,
      capabilities,
      capabilityModule,
      limits: {
        ...(memoryLimitMb !== undefined ? { memoryLimitMb } : {}),
        ...(timeLimitMs !== undefined ? { timeLimitMs } : {}),
      },
      handleSignals: false,
      logger,
      ...(env.TDP_WORKER_DB ? { database: env.TDP_WORKER_DB } : {}),
      ...(concurrency !== undefined ? { concurrency } : {}),
      ...(healthPort !== undefined ? { healthPort } : {}),
      ...(env.TDP_NODE_ID ? { nodeId: env.TDP_NODE_ID } : {}),
      ...(env.TDP_WORKER_NAME ? { name: env.TDP_WORKER_NAME } : {}),
      ...(transport ? { transport: transport as 'rest' | 'grpc' } : {}),
      ...(env.TDP_GRPC_URL?.trim() ? { grpcUrl: env.TDP_GRPC_URL.trim() } : {}),
      tracing: otlpTracingConfigured(env),
      ...(env.TDP_EGRESS_ALLOW?.trim() ? { egressAllow: env.TDP_EGRESS_ALLOW } : {}),
      ...(maxDownloadBytes !== undefined ? { maxDownloadBytes } : {}),
    });
    if (keyFile) followKeyFile(worker, keyFile, startKey, logger);
    return worker;
  } catch (error) {
    // The same check, named by the variable that set the option.
    const variable =
      error instanceof WorkerConfigError &&
      error.option &&
      variables[error.option as keyof StartWorkerOptions];
    if (variable) throw new WorkerConfigError(`${variable} ${error.message}`, error.option);
    throw error;
  }
}

const variables: Partial<Record<keyof StartWorkerOptions, string>> = {
  key: 'TDP_WORKER_KEY (or TDP_WORKER_KEY_FILE)',
  url: 'TDP_URL',
  concurrency: 'TDP_WORKER_CONCURRENCY',
  healthPort: 'TDP_WORKER_HEALTH_PORT',
  transport: 'TDP_WORKER_TRANSPORT',
  egressAllow: 'TDP_EGRESS_ALLOW',
  maxDownloadBytes: 'TDP_WORKER_MAX_DOWNLOAD_BYTES',
  limits: 'TDP_WORKER_MEMORY_LIMIT_MB or TDP_WORKER_TIME_LIMIT_MS',
};

const readKeyFile = async (path: string) => (await readFile(path, 'utf8')).trim();

/**
 * With TDP_WORKER_KEY_FILE, a rotation needs no restart: while TDP refuses the key (it was revoked), the
 * file is read again every few seconds, and a new key in it is taken at once. Results wait in the outbox
 * meanwhile (runtime.ts).
 */
function followKeyFile(
  worker: RunningWorker,
  path: string,
  startKey: string,
  logger: Logger,
  everyMs = 2_000,
): void {
  // The key refused is the one in use: only a different one is worth trying.
  let current = startKey;
  const timer = setInterval(() => {
    if (worker.runtime.status().state !== 'KEY_REFUSED') return;
    readKeyFile(path).then(
      (key) => {
        if (key === current || !key.startsWith('tdpw_')) return;
        current = key;
        logger.info({ keyFile: path }, 'a new worker key in the key file; trying it');
        worker.runtime.setWorkerKey(key);
      },
      (error: unknown) => logger.warn({ keyFile: path, err: error as Error }, 'could not read the key file'),
    );
  }, everyMs);
  timer.unref();
  void worker.done.finally(() => clearInterval(timer));
}
