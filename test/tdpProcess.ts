/**
 * `tdp server` as a real process on a fixed port, so a test can SIGKILL it mid-journey and start it
 * again on the same database, keys and address.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { generateKeyringEntry } from '../packages/server/src/main.ts';
import { testDashboardDirectory } from './dashboardPages.ts';

const cli = new URL('../packages/cli/src/main.ts', import.meta.url).pathname;

export interface TdpProcess {
  url: string;
  adminToken: string;
  /**
   * Starts the server (again); resolves once /readyz answers 200 (or, with `until: 'live'`, once
   * /healthz does: a server expected to stay not ready).
   */
  start(options?: { until?: 'ready' | 'live' }): Promise<void>;
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Sends `signal` and waits up to `withinMs` for the process to exit: its exit code, or null if it did not. */
  stop(signal: NodeJS.Signals, withinMs: number): Promise<number | null>;
  /** One JSON request to the server (the admin token unless another is given). */
  request(
    method: string,
    path: string,
    options?: { token?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: any }>;
  /** A tenant and an application in it: the application's API key. */
  createApplication(name: string): Promise<string>;
}

export function tdpProcess(options: {
  databaseUrl: string;
  port: number;
  /** More environment for the process (settings). */
  env?: Record<string, string>;
  /** Pass the server's log (stdout) through instead of dropping it. */
  showLogs?: boolean;
  /** Each line the server logs (stdout), for a test that reads the log. */
  onLogLine?: (line: string) => void;
}): TdpProcess {
  const adminToken = `tdpadm_test_${Date.now()}`;
  const env = {
    ...process.env,
    DATABASE_URL: options.databaseUrl,
    TDP_PORT: String(options.port),
    // The tests' own build when a test run made one (the fuzz runs this without the tests' setup).
    ...(existsSync(join(testDashboardDirectory, 'index.html'))
      ? { TDP_DASHBOARD_DIR: testDashboardDirectory }
      : {}),
    TDP_HOST: '127.0.0.1',
    TDP_ADMIN_TOKEN: adminToken,
    TDP_SECRET_KEYS: generateKeyringEntry('test1'),
    TDP_ALLOW_INSECURE_CALLBACKS: 'true',
    TDP_EGRESS_ALLOW: '127.0.0.0/8',
    TDP_LOG_LEVEL: 'warn',
    TDP_GATEWAY_API_KEY: 'gateway-api-key-for-tests',
    NATS_URL: '',
    REDIS_URL: '',
    ...options.env,
  };
  const url = `http://127.0.0.1:${options.port}`;
  let child: ChildProcess | null = null;
  const request: TdpProcess['request'] = async (method, path, { token = adminToken, body, headers } = {}) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null };
  };
  return {
    url,
    adminToken,
    request,
    createApplication: async (name) => {
      const tenant = await request('POST', '/admin/v1/tenants', { body: { name: `tenant-${name}` } });
      const created = await request('POST', `/admin/v1/tenants/${tenant.body.id}/applications`, {
        body: { name },
      });
      if (created.status !== 201)
        throw new Error(`create application: ${created.status} ${JSON.stringify(created.body)}`);
      return created.body.apiKey.key as string;
    },
    start: async ({ until = 'ready' } = {}) => {
      const started = spawn(
        process.execPath,
        ['--conditions=@tdp/source', '--import', 'tsx', cli, 'server'],
        {
          env,
          stdio: ['ignore', options.onLogLine ? 'pipe' : options.showLogs ? 'inherit' : 'ignore', 'inherit'],
        },
      );
      if (options.onLogLine && started.stdout)
        createInterface({ input: started.stdout }).on('line', options.onLogLine);
      child = started;
      const deadline = Date.now() + 60_000;
      for (;;) {
        if (started.exitCode !== null) throw new Error(`tdp server exited with ${started.exitCode}`);
        const ready = await fetch(`${url}/${until === 'ready' ? 'readyz' : 'healthz'}`).then(
          (r) => r.status === 200,
          () => false,
        );
        if (ready) return;
        if (Date.now() > deadline) throw new Error('tdp server did not become ready');
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    stop: async (signal, withinMs) => {
      const running = child;
      if (!running || running.exitCode !== null || running.signalCode !== null)
        return running?.exitCode ?? null;
      const exited = new Promise<number | null>((resolve) => running.once('exit', (code) => resolve(code)));
      running.kill(signal);
      const code = await Promise.race([
        exited,
        new Promise<'running'>((resolve) => setTimeout(() => resolve('running'), withinMs)),
      ]);
      if (code !== 'running') child = null;
      return code === 'running' ? null : code;
    },
    kill: async (signal = 'SIGKILL') => {
      const running = child;
      child = null;
      if (!running || running.exitCode !== null || running.signalCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill(signal);
      await exited;
    },
  };
}
