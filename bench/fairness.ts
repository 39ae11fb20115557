/**
 * `npm run bench -- fairness`: does a noisy tenant starve a quiet one? The workers have a fixed capacity
 * (2 processes × 4 slots, 80 ms a job: at most 100 jobs/s, less what each system spends between jobs).
 *
 * - Alone: the quiet tenant submits 20 jobs/s (a fifth of the capacity); its submit → start p50/p99.
 * - Beside: the same, while a noisy tenant submits 200 jobs/s (10× the quiet rate, twice the capacity) —
 *   the quiet tenant's submit → start again, and each tenant's share of the jobs completed in that
 *   window. Under fair placement the quiet tenant still gets the 20/s it asks for and its latency barely
 *   moves (target: p99 beside ≤ 1.5× alone); in arrival order it waits behind the noisy backlog, which
 *   grows for the whole window. A quiet job not started a few seconds after the window counts with its
 *   age then (a lower bound: such a p99 is printed with ≥).
 * - The same on graphile-worker and pg-boss (one queue, the tenant a field of the payload: they place
 *   in arrival order), with the same worker capacity.
 * - Placement throughput (TDP): a backlog of 10,000 one-step tasks submitted with no worker running, then
 *   workers with room for all of it; starts per second from the first start to the last, with every
 *   task of one customer (its concurrency key's pool and its fairness key), then spread over 10,000
 *   customers (target: ≥ 0.8× the one-customer figure).
 */
import { Pool } from 'undici';
import { startWorkers, type Workers } from './e2e.ts';
import { benchDatabase, percentile, runLoad, sane, sized, smoke, startBenchServer } from './support.ts';

const quietRate = 20;
const noisyRate = 200;
const capacity = { BENCH_WORKER_SLOTS: '4', BENCH_WORKER_WORK_MS: '80' };
const aloneSeconds = sized('BENCH_FAIRNESS_ALONE', 10, 3);
const besideSeconds = sized('BENCH_FAIRNESS_BESIDE', 25, 4);
/** How long quiet jobs may still take to start once the contended window is over. */
const graceMs = sized(null, 5_000, 3_000);
const warm = sized(null, 100, 20);
const backlog = sized('BENCH_FAIRNESS_BACKLOG', 10_000, 300);
const manyKeys = sized('BENCH_FAIRNESS_KEYS', 10_000, 100);
/** A smoke run has TDP alone: the peers would show nothing about whether this bench still works. */
const only = process.env.BENCH_FAIRNESS_ONLY ?? (smoke ? 'TDP' : undefined);
const clients = 16;

type Tenant = 'quiet' | 'noisy';

/** One system under the scenario: a job for a tenant, submitted at `sentAt`; its workers; clean-up. */
interface System {
  submit(tenant: Tenant | 'warm', i: number, sentAt: number): Promise<void>;
  workers: Workers;
  close(): Promise<void>;
}

interface Figures {
  alone: number[];
  beside: number[];
  /** Whether some of `beside` are lower bounds (jobs not started by the end of the grace period). */
  censored: boolean;
  /** Jobs completed per tenant during the contended window, and its length. */
  completed: Record<Tenant, number>;
  seconds: number;
}

/** Submits jobs of `tenant` at `rate` per second for `seconds`; resolves with their submit times. */
async function paced(system: System, tenant: Tenant, rate: number, seconds: number, first: number) {
  const count = Math.round(rate * seconds);
  const sentAts: number[] = [];
  const sends: Promise<void>[] = [];
  const t0 = performance.now();
  for (let i = 0; i < count; i += 1) {
    const wait = t0 + (i * 1000) / rate - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const sentAt = Date.now();
    sentAts.push(sentAt);
    sends.push(system.submit(tenant, first + i, sentAt));
  }
  await Promise.all(sends);
  return sentAts;
}

/**
 * The quiet tenant's latencies for the jobs submitted at `sentAts`, gathered until all have started or
 * `timeoutMs` has passed; a job not started by then counts with its age (the latest submitted ones:
 * a lower bound whatever the order of placement).
 */
async function quietLatencies(workers: Workers, sentAts: number[], timeoutMs: number) {
  const latencies: number[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    latencies.push(...((await workers.report()).tagged.quiet ?? []));
    if (latencies.length >= sentAts.length || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const missing = sentAts.length - latencies.length;
  const now = Date.now();
  for (const sentAt of sentAts.slice(sentAts.length - missing)) latencies.push(now - sentAt);
  return { latencies: latencies.sort((a, b) => a - b), censored: missing > 0 };
}

async function scenario(system: System): Promise<Figures> {
  const { workers } = system;
  await runLoad(warm, clients, (i) => system.submit('warm', i, Date.now()));
  const deadline = Date.now() + 60_000;
  while (workers.handled() < warm) {
    if (Date.now() > deadline) throw new Error(`only ${workers.handled()} of ${warm} warm-up jobs started`);
    await new Promise((r) => setTimeout(r, 50));
  }
  await workers.report();

  const aloneSent = await paced(system, 'quiet', quietRate, aloneSeconds, 0);
  const alone = await quietLatencies(workers, aloneSent, 30_000);
  sane(!alone.censored, `the quiet tenant's jobs all start when it is alone`);

  const before = workers.completed();
  const started = performance.now();
  const [besideSent] = await Promise.all([
    paced(system, 'quiet', quietRate, besideSeconds, aloneSent.length),
    paced(system, 'noisy', noisyRate, besideSeconds, 0),
  ]);
  const after = workers.completed();
  const seconds = (performance.now() - started) / 1000;
  const beside = await quietLatencies(workers, besideSent, graceMs);
  const done = (tenant: Tenant) => (after[tenant] ?? 0) - (before[tenant] ?? 0);
  const completed = { quiet: done('quiet'), noisy: done('noisy') };
  sane(completed.quiet + completed.noisy > 0, 'jobs completed while both tenants submit');
  return { alone: alone.latencies, beside: beside.latencies, censored: beside.censored, completed, seconds };
}

/** The one-step no-op workflow; `inputMapping` names only what every task of it has in its input. */
const tdpDefinition = (inputMapping: Record<string, string>, extra: Record<string, unknown> = {}) => ({
  name: 'noop',
  version: '1',
  ...extra,
  steps: [{ key: 'noop', capability: 'noop', capabilityVersion: '1', inputMapping }],
});

/** A TDP server, a worker key and `tenants` tenants with the no-op workflow published in each. */
async function tdpServer(tenants: number, definition: Record<string, unknown>) {
  const database = await benchDatabase();
  const server = await startBenchServer(database.url);
  const admin = { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' };
  const workerKey = (
    (await (
      await fetch(`${server.base}/admin/v1/worker-credentials`, {
        method: 'POST',
        headers: admin,
        body: '{}',
      })
    ).json()) as { key: string }
  ).key;
  const keys = [server.apiKey];
  for (let i = 1; i < tenants; i += 1) keys.push((await server.addTenant(`bench-tenant-${i}`)).apiKey);
  const published: number[] = [];
  for (const key of keys) {
    const response = await fetch(`${server.base}/v1/workflow-definitions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(definition),
    });
    await response.body?.cancel();
    published.push(response.status);
  }
  const pool = new Pool(server.base, { connections: clients });
  const run = Date.now();
  const create = async (
    key: string,
    i: number,
    input: Record<string, unknown>,
    extra: Record<string, unknown> = {},
  ) => {
    const response = await pool.request({
      method: 'POST',
      path: '/v1/tasks',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        'idempotency-key': `${run}-${i}`,
      },
      body: JSON.stringify({
        workflowName: 'noop',
        workflowVersion: '1',
        name: `noop ${i}`,
        input,
        ...extra,
      }),
    });
    const text = await response.body.text();
    if (response.statusCode !== 201)
      throw new Error(`POST /v1/tasks answered ${response.statusCode}: ${text.slice(0, 300)}`);
  };
  return {
    server,
    workerKey,
    keys,
    published,
    create,
    close: async () => {
      await pool.close();
      await server.stop();
      await database.close();
    },
  };
}

/** TDP: the quiet tenant and the noisy one are two tenants (one application each) of one server. */
async function tdpSystem(): Promise<System> {
  const tdp = await tdpServer(2, tdpDefinition({ sentAt: '$.input.sentAt', tag: '$.input.tag' }));
  sane(
    tdp.published.every((status) => status < 300),
    `the workflow is published (${tdp.published.join(', ')})`,
  );
  const [quietKey, noisyKey] = tdp.keys as [string, string];
  const workers = startWorkers('tdp', tdp.server.base, tdp.workerKey, capacity);
  return {
    workers,
    // Idempotency keys are per application: the tenant in the number keeps them apart anyway.
    submit: (tenant, i, sentAt) =>
      tdp.create(
        tenant === 'noisy' ? noisyKey : quietKey,
        i * 3 + ['warm', 'quiet', 'noisy'].indexOf(tenant),
        {
          sentAt,
          tag: tenant,
        },
      ),
    close: async () => {
      await workers.stop();
      await tdp.close();
    },
  };
}

async function graphileSystem(): Promise<System> {
  const database = await benchDatabase();
  const { makeWorkerUtils, Logger } = await import('graphile-worker');
  const { default: pg } = await import('pg');
  const pgPool = new pg.Pool({ connectionString: database.url, max: clients });
  pgPool.on('error', () => {});
  pgPool.on('connect', (client) => client.on('error', () => {}));
  const utils = await makeWorkerUtils({ pgPool, logger: new Logger(() => () => {}) });
  await utils.migrate();
  const workers = startWorkers('graphile', database.url, '', capacity);
  return {
    workers,
    submit: async (tenant, _i, sentAt) => {
      await utils.addJob('noop', { sentAt, tag: tenant });
    },
    close: async () => {
      await workers.stop();
      await utils.release();
      await pgPool.end();
      await database.close();
    },
  };
}

async function pgBossSystem(): Promise<System> {
  const database = await benchDatabase();
  const { PgBoss } = await import('pg-boss');
  const boss = new PgBoss({ connectionString: database.url, max: clients });
  boss.on('error', () => {});
  await boss.start();
  await boss.createQueue('noop', { notify: true } as never);
  const workers = startWorkers('pgboss', database.url, '', capacity);
  return {
    workers,
    submit: async (tenant, _i, sentAt) => {
      await boss.send('noop', { sentAt, tag: tenant });
    },
    close: async () => {
      await workers.stop();
      await boss.stop({ graceful: false } as never).catch(() => {});
      await database.close();
    },
  };
}

/**
 * Starts per second placing a backlog of `backlog` one-step tasks spread over `keys` customers: values of
 * one concurrency key (limit far above the backlog: the key's bookkeeping is measured, not its limit) and
 * fairness keys.
 * `withKeys` is false when the server does not accept concurrency keys: then the figure is without them.
 */
async function placement(keys: number): Promise<{ perSecond: number; withKeys: boolean }> {
  const concurrency = [{ key: 'customer', value: '$.input.customerId', limit: 1_000_000 }];
  const inputMapping = { customerId: '$.input.customerId' };
  // A key read from the input must be one the input schema guarantees (publish checks it).
  const inputSchema = {
    type: 'object',
    required: ['customerId'],
    properties: { customerId: { type: 'string' } },
  };
  let tdp = await tdpServer(1, tdpDefinition(inputMapping, { concurrency, inputSchema }));
  const withKeys = tdp.published[0]! < 300;
  if (!withKeys) {
    await tdp.close();
    tdp = await tdpServer(1, tdpDefinition(inputMapping));
  }
  try {
    const key = tdp.keys[0]!;
    // Each customer is also the task's fairness key: the round takes its turns over as many key lines.
    await runLoad(backlog, clients * 2, (i) =>
      tdp.create(
        key,
        i,
        { customerId: `customer-${i % keys}` },
        withKeys ? { fairness: { key: `customer-${i % keys}` } } : {},
      ),
    );
    // Workers with room for the whole backlog: 2 × 256 slots of jobs that finish at once.
    const workers = startWorkers('tdp', tdp.server.base, tdp.workerKey);
    try {
      const deadline = Date.now() + sized(null, 300_000, 60_000);
      while (workers.handled() === 0) {
        if (Date.now() > deadline) throw new Error('no task of the backlog started');
        await new Promise((r) => setTimeout(r, 5));
      }
      const first = performance.now();
      while (workers.handled() < backlog) {
        if (Date.now() > deadline)
          throw new Error(`only ${workers.handled()} of ${backlog} backlog tasks started`);
        await new Promise((r) => setTimeout(r, 5));
      }
      return { perSecond: (backlog - 1) / ((performance.now() - first) / 1000), withKeys };
    } finally {
      await workers.stop();
    }
  } finally {
    await tdp.close();
  }
}

const ms = (value: number) => value.toFixed(0).padStart(7);

export async function benchFairness(): Promise<void> {
  console.log(
    `fairness: 2 worker processes × ${capacity.BENCH_WORKER_SLOTS} slots, ${capacity.BENCH_WORKER_WORK_MS} ms a job; ` +
      `quiet tenant ${quietRate}/s alone for ${aloneSeconds} s, then beside a noisy one at ${noisyRate}/s for ${besideSeconds} s`,
  );
  console.log('');
  console.log(
    '  | system          | alone p50 | alone p99 | beside p50 | beside p99 | p99 ÷ alone | all jobs/s | quiet jobs/s | quiet share | noisy share |',
  );
  console.log(
    '  | --------------- | --------- | --------- | ---------- | ---------- | ----------- | ---------- | ------------ | ----------- | ----------- |',
  );
  let tdpRatio: string | null = null;
  for (const [name, setup] of [
    ['graphile-worker', graphileSystem],
    ['pg-boss', pgBossSystem],
    ['TDP', tdpSystem],
  ] as const) {
    if (only && !only.split(',').includes(name)) continue;
    const system = await setup();
    let figures: Figures;
    try {
      figures = await scenario(system);
    } finally {
      await system.close();
    }
    const p99Alone = percentile(figures.alone, 99);
    const p99Beside = percentile(figures.beside, 99);
    const ratio = p99Beside / p99Alone;
    const at = figures.censored ? '≥' : '';
    if (name === 'TDP') tdpRatio = `${at}${ratio.toFixed(2)}`;
    const all = figures.completed.quiet + figures.completed.noisy;
    const cells = [
      name.padEnd(15),
      `${ms(percentile(figures.alone, 50))} ms`,
      `${ms(p99Alone)} ms`,
      `${`${at}${percentile(figures.beside, 50).toFixed(0)}`.padStart(8)} ms`,
      `${`${at}${p99Beside.toFixed(0)}`.padStart(8)} ms`,
      `${at}${ratio.toFixed(2)}`.padStart(11),
      (all / figures.seconds).toFixed(1).padStart(10),
      `${(figures.completed.quiet / figures.seconds).toFixed(1)} of ${quietRate}`.padStart(12),
      `${((100 * figures.completed.quiet) / all).toFixed(1)} %`.padStart(11),
      `${((100 * figures.completed.noisy) / all).toFixed(1)} %`.padStart(11),
    ];
    console.log(`  | ${cells.join(' | ')} |`);
  }
  if (tdpRatio !== null)
    console.log(`  TDP: the quiet tenant's p99 beside the noisy one ÷ alone ${tdpRatio} (target <= 1.5)`);

  console.log('');
  const one = await placement(1);
  const many = await placement(manyKeys);
  if (!one.withKeys || !many.withKeys)
    console.log('  (concurrency keys not available: placement figure without keys)');
  sane(one.perSecond > 0 && many.perSecond > 0, 'the backlogs were placed');
  console.log(
    `  placement of ${backlog} waiting tasks: 1 key ${one.perSecond.toFixed(0)} starts/s, ` +
      `${manyKeys} keys ${many.perSecond.toFixed(0)} starts/s, ratio ${(many.perSecond / one.perSecond).toFixed(2)} (target >= 0.8)`,
  );
}
