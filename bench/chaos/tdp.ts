/**
 * TDP under chaos: two `tdp server` replicas (real processes of the CLI) on one database, two worker
 * processes (the `tdp worker` runtime with the suite's sleep capability), the first connected to
 * replica A and the second to B; the client alternates replicas and, when one fails, retries on the
 * other with the same Idempotency-Key.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../packages/cli/src/embeddedPostgres.ts';
import { connectDatabase, generateKeyringEntry, migrate } from '../../packages/server/src/main.ts';
import { type Cluster, Monitor } from './cluster.ts';
import { ProcessGroup, type Supervised } from './processes.ts';
import { Completions, type SystemOptions, type SystemUnderTest, until, workerEnv } from './system.ts';

const cli = 'packages/cli/src/main.ts';
/** How long a stopped process may take to exit before it counts as wedged (TDP's own deadline is 30 s). */
const terminateDeadlineMs = 35_000;

/** One task of the chaos workflow, `key` its idempotency key; the answer's status. */
export async function createChaosTask(base: string, apiKey: string, key: string, sentAt: number) {
  const response = await fetch(`${base}/v1/tasks`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': key,
    },
    body: JSON.stringify({ workflowName: 'chaos', workflowVersion: '1', name: key, input: { key, sentAt } }),
    signal: AbortSignal.timeout(10_000),
  });
  await response.body?.cancel();
  return response.status;
}

export async function startTdp(
  cluster: Cluster,
  runName: string,
  options: SystemOptions,
): Promise<SystemUnderTest> {
  const database = await cluster.createDatabase('chaos_tdp');
  // Every host of a failover pair: TDP follows a promotion itself (docs/operations.md).
  const url = cluster.urlFor(database, { multiHost: true });
  const migrator = connectDatabase({ url, maxConnections: 1 });
  await migrate(migrator);
  await migrator.end();
  const processes = new ProcessGroup(runName);
  const completions = new Completions();
  const monitor = new Monitor(cluster.urlFor(database)); // the suite's own client takes one host
  const home = await mkdtemp(join(tmpdir(), 'tdp-chaos-workers-'));
  const adminToken = `tdpadm_chaos_${Date.now()}`;
  const serverEnv = {
    DATABASE_URL: url,
    TDP_HOST: '127.0.0.1',
    TDP_ADMIN_TOKEN: adminToken,
    TDP_SECRET_KEYS: generateKeyringEntry('chaos'),
    TDP_LOG_LEVEL: 'warn',
    NATS_URL: '',
    REDIS_URL: '',
  };
  const bases: string[] = [];
  const servers: Supervised[] = [];
  for (const name of ['server-a', 'server-b']) {
    const port = await freePort();
    bases.push(`http://127.0.0.1:${port}`);
    servers.push(processes.add(name, [cli, 'server'], { ...serverEnv, TDP_PORT: String(port) }));
  }
  const ready = async (base: string) =>
    fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2_000) }).then(
      (r) => r.status === 200,
      () => false,
    );
  const startServer = async (i: number) => {
    servers[i]!.start();
    await until(() => ready(bases[i]!), 60_000, `${servers[i]!.name} ready`);
  };
  await Promise.all([startServer(0), startServer(1)]);

  const admin = { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' };
  const post = async <T>(path: string, headers: Record<string, string>, body: unknown): Promise<T> => {
    const response = await fetch(`${bases[0]}${path}`, {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`POST ${path} answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as T;
  };
  const tenant = await post<{ id: string }>('/admin/v1/tenants', admin, { name: runName });
  const app = await post<{ apiKey: { key: string } }>(`/admin/v1/tenants/${tenant.id}/applications`, admin, {
    name: 'chaos',
  });
  const workerKey = (await post<{ key: string }>('/admin/v1/worker-credentials', admin, {})).key;
  const headers = { authorization: `Bearer ${app.apiKey.key}`, 'content-type': 'application/json' };
  await post('/v1/workflow-definitions', headers, {
    name: 'chaos',
    version: '1',
    steps: [
      {
        key: 'sleep',
        capability: 'chaos.sleep',
        capabilityVersion: '1',
        inputMapping: { key: '$.input.key', sentAt: '$.input.sentAt' },
      },
    ],
  });

  const workers = [0, 1].map((i) =>
    processes.add(
      `worker-${i + 1}`,
      ['bench/chaos/worker.ts', 'tdp'],
      {
        ...workerEnv(options),
        // Each worker starts on its own replica and knows the other one to fail over to.
        TDP_URL: `${bases[i]},${bases[1 - i]}`,
        TDP_WORKER_KEY: workerKey,
        TDP_WORKER_DB: join(home, `worker-${i + 1}.db`),
        TDP_NODE_ID: `chaos-node-${i + 1}`,
        TDP_WORKER_NAME: `chaos-${i + 1}`,
      },
      completions.onLine,
    ),
  );
  for (const worker of workers) worker.start();
  await until(
    async () =>
      Number((await monitor.query<{ n: number }>('SELECT count(*)::int AS n FROM worker'))?.[0]?.n ?? 0) >= 2,
    60_000,
    'both TDP workers registered',
  );

  return {
    name: 'TDP',
    database,
    processes,
    completions,
    replica: {
      name: 'server-a',
      kill: () => servers[0]!.kill(),
      restart: () => startServer(0),
    },
    workers: workers.map((worker) => ({
      name: worker.name,
      kill: () => worker.kill(),
      restart: async () => worker.start(),
    })),
    submit: async (key, sentAt, attempt) => {
      const replica = (Number(key.slice(key.lastIndexOf('-') + 1)) + attempt) % 2;
      const status = await createChaosTask(bases[replica]!, app.apiKey.key, key, sentAt);
      if (status !== 201 && status !== 200) throw new Error(`POST /v1/tasks answered ${status}`);
      return servers[replica]!.name;
    },
    // Worker i starts on replica i (TDP_URL lists its own first).
    homeReplicaOf: (worker) => servers[Number(worker.slice(worker.lastIndexOf('-') + 1)) - 1]?.name,
    finished: async () => {
      const rows = await monitor.query<{ key: string }>(
        `SELECT input->>'key' AS key FROM task WHERE lifecycle_status = 'SUCCEEDED'`,
      );
      return rows && new Set(rows.map((r) => r.key));
    },
    integrity: async () => {
      const rows = await monitor.query<{
        rows_per_key: number;
        step_successes: number;
        version_gaps: number;
      }>(`
        SELECT
          (SELECT count(*)::int FROM (SELECT 1 FROM task GROUP BY input->>'key' HAVING count(*) > 1) d)
            AS rows_per_key,
          (SELECT count(*)::int FROM (
             SELECT 1 FROM task_event WHERE type = 'STEP_COMPLETED'
             GROUP BY task_id, step_key, execution_id HAVING count(*) > 1) s) AS step_successes,
          (SELECT count(*)::int FROM (
             SELECT 1 FROM task t JOIN task_event e ON e.task_id = t.id
             GROUP BY t.id, t.version
             HAVING count(*) <> max(e.task_version) - min(e.task_version) + 1
                 OR max(e.task_version) <> t.version) g) AS version_gaps`);
      const row = rows?.[0];
      return row
        ? { rowsPerKey: row.rows_per_key, stepSuccesses: row.step_successes, versionGaps: row.version_gaps }
        : null;
    },
    unresponsive: async () => {
      const answers = await Promise.all(
        servers.map(async (server, i) =>
          server.running() && !(await ready(bases[i]!)) ? `${server.name} (/readyz not 200)` : null,
        ),
      );
      return answers.filter((a): a is string => a !== null);
    },
    close: async () => {
      await processes.close(terminateDeadlineMs);
      await monitor.close();
      await rm(home, { recursive: true, force: true });
    },
  };
}
