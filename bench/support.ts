/** Shared pieces of the benchmarks: a real PostgreSQL, a fresh database, a server, percentiles. */

import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { freePort, startTemporaryPostgres } from '../packages/cli/src/embeddedPostgres.ts';
import { connectDatabase, generateKeyringEntry, migrate } from '../packages/server/src/main.ts';

/**
 * Smoke mode (`BENCH_SMOKE=1` or `--smoke`): every benchmark end to end at a small size, without peers,
 * to show that it still runs and gives sane figures — not figures to compare.
 */
export const smoke = process.env.BENCH_SMOKE === '1' || process.argv.includes('--smoke');

/** A size of a benchmark: the `env` variable when set, else `full`, or `small` in smoke mode. */
export function sized(env: string | null, full: number, small: number): number {
  const given = env ? process.env[env] : undefined;
  return given !== undefined && given !== '' ? Number(given) : smoke ? small : full;
}

/** Fails the run when a benchmark's result is obviously broken (nothing done, no deliveries). */
export function sane(ok: boolean, what: string): void {
  if (!ok) throw new Error(`broken result: ${what}`);
}

/**
 * A migrated database of its own on `onServer` (an admin URL), DATABASE_URL's server, or an embedded
 * PostgreSQL of its own.
 */
export async function benchDatabase(
  onServer?: string,
  /** Settings of the temporary server (none is started with `onServer` or DATABASE_URL). */
  settings?: Record<string, string>,
): Promise<{
  url: string;
  /** Writes out what a burst left behind (a checkpoint), as a server in its steady state would have. */
  checkpoint(): Promise<void>;
  close(): Promise<void>;
}> {
  let adminUrl = onServer ?? process.env.DATABASE_URL;
  let stopServer = async () => {};
  if (!adminUrl) {
    const postgres = await startTemporaryPostgres(settings);
    adminUrl = postgres.adminUrl;
    stopServer = () => postgres.stop();
  }
  const name = `tdp_bench_${randomBytes(4).toString('hex')}`;
  const admin = connectDatabase({ url: adminUrl, maxConnections: 1 });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const sql = connectDatabase({ url: url.toString(), maxConnections: 1 });
  await migrate(sql);
  await sql.end();
  return {
    url: url.toString(),
    checkpoint: async () => {
      await admin.unsafe('CHECKPOINT');
    },
    close: async () => {
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
      await stopServer();
    },
  };
}

/** The one-step workflow the queue benchmarks run: a `noop` capability given `fields` of the task input. */
export const noopWorkflow = (fields: string[]) => ({
  name: 'noop',
  version: '1',
  steps: [
    {
      key: 'noop',
      capability: 'noop',
      capabilityVersion: '1',
      inputMapping: Object.fromEntries(fields.map((field) => [field, `$.input.${field}`])),
    },
  ],
});

export function percentile(sortedMs: number[], p: number): number {
  if (sortedMs.length === 0) return Number.NaN;
  return sortedMs[Math.min(sortedMs.length - 1, Math.floor((p / 100) * sortedMs.length))]!;
}

/** The 99th percentile of unsorted values (sorts them), or null for none. */
export const p99Of = (values: number[]): number | null =>
  values.length > 0
    ? percentile(
        values.sort((a, b) => a - b),
        99,
      )
    : null;

export interface LoadResult {
  count: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** Each operation's, sorted (to merge runs: `mergeLoads`). */
  latencies?: number[];
}

/** Two runs of the same load as one: their counts and times added, percentiles over all operations. */
export function mergeLoads(a: LoadResult, b: LoadResult): LoadResult {
  const latencies = [...(a.latencies ?? []), ...(b.latencies ?? [])].sort((x, y) => x - y);
  const count = a.count + b.count;
  const seconds = a.seconds + b.seconds;
  return {
    count,
    seconds,
    perSecond: count / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    latencies,
  };
}

/**
 * Runs `operation` from `concurrency` workers until `total` operations are done; measures each one.
 * `worker` (0 to concurrency - 1) is the worker running it, so that a worker can own its share of the
 * load (e.g. executions whose sequences must arrive in order).
 */
export async function runLoad(
  total: number,
  concurrency: number,
  operation: (i: number, worker: number) => Promise<void>,
): Promise<LoadResult> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (next < total) {
        const i = next++;
        const t0 = performance.now();
        await operation(i, worker);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    count: total,
    seconds,
    perSecond: total / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    latencies,
  };
}

export function describe(result: LoadResult): string {
  return `${result.perSecond.toFixed(0)}/s  p50 ${result.p50.toFixed(2)} ms  p99 ${result.p99.toFixed(2)} ms  (${result.count} in ${result.seconds.toFixed(1)} s)`;
}

/** POSTs `body` to a bench server with `token`; throws unless it answered 2xx (the answer names why). */
export async function benchPost<T>(base: string, path: string, token: string, body: unknown): Promise<T> {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  if (!response.ok) throw new Error(`POST ${path} answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as T;
}

/** A new tenant with one application on a bench server: its application key and ids. */
export async function addBenchTenant(base: string, adminToken: string, name: string) {
  const tenant = await benchPost<{ id: string }>(base, '/admin/v1/tenants', adminToken, { name });
  const app = await benchPost<{ apiKey: { key: string }; application: { id: string } }>(
    base,
    `/admin/v1/tenants/${tenant.id}/applications`,
    adminToken,
    { name: 'bench' },
  );
  return { apiKey: app.apiKey.key, applicationId: app.application.id, tenantId: tenant.id };
}

/**
 * The rate limits stay on (their cost is measured) but far above any rate a benchmark reaches, so that
 * none is throttled whatever the defaults become.
 */
export const benchRateLimits = Object.fromEntries(
  ['APPLICATION', 'WORKER', 'EXECUTION'].flatMap((credential) => [
    [`TDP_RATE_LIMIT_${credential}_PER_SECOND`, '1000000'],
    [`TDP_RATE_LIMIT_${credential}_BURST`, '1000000'],
  ]),
);

/**
 * A real `tdp server` process on the bench database, with one tenant and application ready. For
 * diagnosis: BENCH_PROFILE=1 writes its CPU profile to /tmp/prof, BENCH_NODE_FLAGS adds Node flags
 * (e.g. `--trace-gc`), BENCH_LOG_LEVEL=debug logs every request with its duration.
 */
export async function startBenchServer(databaseUrl: string, env: Record<string, string> = {}) {
  const port = await freePort();
  const grpcPort = await freePort();
  const adminToken = randomBytes(24).toString('hex');
  const child: ChildProcess = spawn(
    process.execPath,
    [
      ...(process.env.BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir=/tmp/prof'] : []),
      ...(process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean),
      '--conditions=@tdp/source',
      '--import',
      'tsx',
      'packages/cli/src/main.ts',
      'server',
    ],
    {
      env: {
        ...process.env,
        DATABASE_URL: databaseUrl,
        TDP_PORT: String(port),
        TDP_GRPC_PORT: String(grpcPort),
        TDP_ADMIN_TOKEN: adminToken,
        TDP_SECRET_KEYS: generateKeyringEntry('bench'),
        TDP_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
        NATS_URL: '',
        ...benchRateLimits,
        ...env,
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${base}/readyz`)).ok) break;
    } catch {}
    if (Date.now() > deadline || child.exitCode !== null) throw new Error('tdp server did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
  const addTenant = (name: string) => addBenchTenant(base, adminToken, name);
  const first = await addTenant(`bench-${port}`);
  return {
    base,
    /** The gRPC reporting address (docs/grpc.md). */
    grpcAddress: `127.0.0.1:${grpcPort}`,
    adminToken,
    /** The server's process id (for `cpuSeconds`). */
    pid: child.pid!,
    ...first,
    /** Another tenant on the same server (the fairness bench: a quiet one beside a noisy one). */
    addTenant,
    stop: async () => {
      child.kill('SIGTERM');
      if (child.exitCode === null) await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}

/** CPU seconds (user and system) process `pid` has used so far, from /proc (Linux; 0 once it is gone). */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  if (!stat) return 0;
  // The fields after the command's closing parenthesis; utime and stime are the 14th and 15th in all.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds of the PostgreSQL backends serving database `name` (their titles name it). */
export async function postgresCpuSeconds(name: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const title = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (title.startsWith('postgres: ') && title.includes(` ${name} `))
      total += await cpuSeconds(Number(entry));
  }
  return total;
}
