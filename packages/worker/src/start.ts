/**
 * `startWorker()`: the worker runtime in someone else's program. It opens the local database, registers
 * the capabilities, serves the health endpoint if asked, and drains on SIGTERM/SIGINT (nothing new is
 * taken; running attempts finish within the grace period or are handed back to run elsewhere).
 */
import { mkdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, resolve } from 'node:path';
import { egressPolicy } from '@tdp/egress/policy';
import { defaultWorkerConcurrency, type GrantRenewalPolicy, newId } from '@tdp/protocol';
import { serverUrls, WorkerClient } from './client.ts';
import { WorkerConfigError } from './configError.ts';
import { type HealthServer, serveHealth } from './health.ts';
import { capabilitiesOf } from './isolation/capabilityModule.ts';
import { RunnerPool } from './isolation/runnerPool.ts';
import { LocalStore } from './localStore.ts';

export { WorkerConfigError };

import { importOptional } from './optionalPackages.ts';
import { jsonLogger, type Logger } from './options.ts';
import { WorkerRuntime } from './runtime.ts';
import type { Capability } from './sdk.ts';
import { noSpans, openTelemetrySpans, otlpTracingConfigured, type WorkerSpans } from './tracing.ts';

export interface StartWorkerOptions {
  /** The TDP server, or its replicas: the worker moves to the next when the one it uses stops answering. */
  url: string | readonly string[];
  /** A worker key, `tdpw_…` (POST /admin/v1/worker-credentials). */
  key: string;
  /**
   * The capabilities as objects. Alone, their attempts run inside this process: give them so only for
   * code as trusted as the worker itself (tests, say), else give `capabilityModule`.
   */
  // biome-ignore lint/suspicious/noExplicitAny: capabilities of any input and output types run side by side
  capabilities?: readonly Capability<any, any>[];
  /**
   * The module that exports the capabilities (a path, a file URL, a package name): each attempt then runs
   * in a capability runner, a child process with memory and time limits, so that nothing a capability
   * does — a crash, unbounded memory, an endless loop, `process.exit` — takes down the worker or touches
   * another attempt. `tdp worker` always runs so.
   */
  capabilityModule?: string | URL;
  /** With `capabilityModule`: each runner's memory (MiB, default 2048) and each attempt's time (ms, default 1 h). */
  limits?: { memoryLimitMb?: number; timeLimitMs?: number };
  /** The local SQLite file that keeps commands and results across restarts (default `./.tdp/worker.db`). */
  database?: string;
  /** Attempts run at once, all capabilities together (default 10; each capability may limit its own). */
  concurrency?: number;
  /** How the worker presents itself (default: the host name). */
  name?: string;
  nodeId?: string;
  labels?: Record<string, string>;
  /** How long a drain waits for running attempts before handing them back (default 30 s). */
  drainGraceMs?: number;
  /** Serve `GET /healthz` and `GET /readyz` on this port (0 picks a free one); no endpoint if omitted. */
  healthPort?: number;
  /** The health endpoint's address (default 127.0.0.1). */
  healthHost?: string;
  /**
   * Drain on SIGTERM and SIGINT, then exit the process (default true). Set false to call `drain()`
   * yourself, e.g. when the worker shares the process with a server of yours.
   */
  handleSignals?: boolean;
  /** Where the runtime logs (default: one JSON line per message on stderr; never the key). */
  logger?: Logger;
  /**
   * How events and attempt heartbeats are reported: `rest` (default) or `grpc` (docs/grpc.md; needs
   * `@grpc/grpc-js` and `@grpc/proto-loader` installed).
   */
  transport?: 'rest' | 'grpc';
  /**
   * Spans of attempts and reports on the OpenTelemetry API, recorded by the SDK the program registers
   * (needs `@opentelemetry/api` and `@opentelemetry/core` installed). Default: on when
   * OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set.
   */
  tracing?: boolean;
  /**
   * When a grant still needed (an output not yet uploaded, a download under way) is renewed: once less
   * than `remainingFraction` of its lifetime or `remainingMs` is left (default 25% or 60 s).
   */
  grantRenewal?: GrantRenewalPolicy;
  /** With `grpc`: the server's gRPC address, `host:port` (default: the port it announces, on url's host). */
  grpcUrl?: string;
  /**
   * What downloads and uploads may reach beyond public addresses: CIDRs and `host:port` pairs
   * (`TDP_EGRESS_ALLOW`; docs/security.md). The TDP servers in `url` are always allowed. Default: none.
   */
  egressAllow?: string | readonly string[];
  /** A download larger than this fails with `DOWNLOAD_TOO_LARGE` (default 1 GiB). */
  maxDownloadBytes?: number;
}

export interface RunningWorker {
  /** The worker's id at TDP (its registration). */
  readonly id: string;
  readonly runtime: WorkerRuntime;
  /** The health endpoint's base URL, when one was asked for. */
  readonly healthUrl: string | null;
  /** Settles when the worker has stopped; rejects if a local error stopped it. */
  readonly done: Promise<void>;
  /** Takes nothing new, finishes or hands back running attempts, delivers every result, then closes. */
  drain(): Promise<void>;
}

export async function startWorker(options: StartWorkerOptions): Promise<RunningWorker> {
  // Every option is checked before anything opens (the folder, the local database, a connection).
  if (!options.key?.startsWith('tdpw_')) throw new WorkerConfigError('must be a worker key (tdpw_…)', 'key');
  if (options.concurrency !== undefined && !isConcurrency(options.concurrency))
    throw new WorkerConfigError(
      `must be an integer from 1 to 1000, got ${options.concurrency}`,
      'concurrency',
    );
  const healthPort = options.healthPort;
  if (healthPort !== undefined && !(Number.isInteger(healthPort) && healthPort >= 0 && healthPort < 65536))
    throw new WorkerConfigError(`must be a port, got ${healthPort}`, 'healthPort');
  const transport = options.transport ?? 'rest';
  if (transport !== 'rest' && transport !== 'grpc')
    throw new WorkerConfigError(`must be rest or grpc, got "${transport}"`, 'transport');
  let urls: string[];
  try {
    urls = serverUrls(typeof options.url === 'string' ? options.url : options.url.join(','));
  } catch {
    throw new WorkerConfigError('must be the TDP server’s URL, or its replicas’ URLs', 'url');
  }
  let egressAllow: string[];
  try {
    egressAllow = egressPolicy(options.egressAllow ?? []).allowList.slice();
  } catch (error) {
    throw new WorkerConfigError((error as Error).message, 'egressAllow');
  }
  const maxDownloadBytes = options.maxDownloadBytes;
  if (maxDownloadBytes !== undefined && !(Number.isSafeInteger(maxDownloadBytes) && maxDownloadBytes >= 1))
    throw new WorkerConfigError(`must be a positive integer, got ${maxDownloadBytes}`, 'maxDownloadBytes');
  const limits = options.limits ?? {};
  for (const [name, value] of Object.entries(limits))
    if (value !== undefined && !(Number.isInteger(value) && value >= 1))
      throw new WorkerConfigError(`${name} must be a positive integer, got ${value}`, 'limits');
  const logger = options.logger ?? jsonLogger;
  if (!options.capabilities && !options.capabilityModule)
    throw new WorkerConfigError('give capabilityModule (or capabilities)', 'capabilities');
  // With a module, objects given too are its capabilities as registered (with their limits, say).
  const capabilities = withCapabilityLimits(
    options.capabilities
      ? [...options.capabilities]
      : [...(await capabilitiesOf(options.capabilityModule!)).values()],
    undefined,
  );
  // The optional packages a setting needs, before anything opens: missing, the start fails naming them.
  const grpc =
    transport === 'grpc'
      ? await importOptional(
          () => import('./grpcReporting.ts'),
          ['@grpc/grpc-js', '@grpc/proto-loader'],
          'gRPC reporting',
        )
      : null;
  const spans: WorkerSpans =
    (options.tracing ?? otlpTracingConfigured()) ? await openTelemetrySpans('tracing') : noSpans;
  const runners = options.capabilityModule
    ? new RunnerPool({ module: options.capabilityModule, ...limits })
    : undefined;
  const dbPath = resolve(options.database ?? '.tdp/worker.db');
  mkdirSync(dirname(dbPath), { recursive: true });
  const store = new LocalStore(dbPath, newId);
  const client = new WorkerClient(urls, options.key);
  const reporting = grpc
    ? new grpc.GrpcReporting(
        options.grpcUrl || (() => grpc.grpcAddressOf(client.server, runtime.grpcPort)),
        options.key,
      )
    : undefined;
  const runtime: WorkerRuntime = new WorkerRuntime({
    client,
    ...(reporting ? { reporting } : {}),
    spans,
    store,
    capabilities,
    ...(runners ? { runners } : {}),
    logger,
    ...(options.name ? { name: options.name } : {}),
    ...(options.nodeId ? { nodeId: options.nodeId } : {}),
    ...(options.labels ? { labels: options.labels } : {}),
    ...(options.concurrency ? { maxConcurrency: options.concurrency } : {}),
    ...(options.drainGraceMs !== undefined ? { drainGraceMs: options.drainGraceMs } : {}),
    ...(options.grantRenewal ? { grantRenewal: options.grantRenewal } : {}),
    egressAllow,
    ...(maxDownloadBytes !== undefined ? { maxDownloadBytes } : {}),
  });
  let health = null as HealthServer | null;
  // Once: the runtime stopping by itself (a DRAIN the server sent) and a drain by signal both close.
  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      await runners?.close();
      store.close();
      reporting?.close();
      await client.close();
      await health?.close();
    })());
  let draining: Promise<void> | null = null;
  let starting: Promise<void> = Promise.resolve();
  const drain = () => {
    draining ??= (async () => {
      // A signal during the start drains once the start is over.
      await starting.catch(() => {});
      await runtime.drain();
      await close();
    })();
    return draining;
  };
  // The handlers go in before the worker registers: a SIGTERM as soon as the server sees it READY (a
  // supervisor stopping it at once) drains it instead of killing it mid-start.
  let forget = () => {};
  if (options.handleSignals ?? true) {
    const onSignal = (signal: NodeJS.Signals) => {
      logger.info({ signal }, 'draining: finishing running attempts, taking nothing new');
      drain().then(
        () => process.exit(0),
        (error: unknown) => {
          logger.error({ err: error }, 'drain failed');
          process.exit(1);
        },
      );
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
    forget = () => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
    };
  }
  starting = (async () => {
    // The endpoint first (it answers 503 until the runtime is READY): a port in use fails the start
    // before the worker has registered and taken work.
    if (healthPort !== undefined)
      health = await serveHealth(runtime, healthPort, options.healthHost ?? '127.0.0.1');
    // A capability module that does not load fails the start, before the worker takes work.
    // As many runners as attempts can run at once, up to the CPUs (more start as attempts need them).
    await runners?.warm(Math.min(options.concurrency ?? defaultWorkerConcurrency, availableParallelism()));
    await runtime.start();
  })();
  try {
    await starting;
  } catch (error) {
    forget();
    await runtime.stop();
    await close();
    throw error;
  }
  logger.info(
    {
      workerId: runtime.id,
      capabilities: capabilities.map((c) => `${c.name}@${c.version}`),
      db: dbPath,
      server: client.server,
      transport,
      isolation: runners ? 'process' : 'none',
      ...(health ? { health: health.url } : {}),
    },
    'worker ready',
  );
  // Both ways: `done` rejects on a local error, and that is the caller's to handle, not ours. A runtime
  // that stopped by itself (it drained at the server's command) lets go of the database, the
  // connections and the health endpoint, so the program can end.
  runtime.done.then(() => {
    forget();
    close().catch((error: unknown) => logger.error({ err: error }, 'closing after the drain failed'));
  }, forget);
  return { id: runtime.id!, runtime, healthUrl: health?.url ?? null, done: runtime.done, drain };
}

const isConcurrency = (n: number) => Number.isInteger(n) && n >= 1 && n <= 1000;

/**
 * Each capability's own limit: from `spec` (`name=n,…`), else its own declaration (the built-in ones,
 * CPU-bound, declare the number of CPUs).
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
    const limit = limits.get(c.name) ?? c.maxConcurrency;
    return limit === undefined ? c : { ...c, maxConcurrency: limit };
  });
}
