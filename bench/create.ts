/**
 * `npm run bench -- create`: tasks created per second through POST /v1/tasks (HTTP, 16 concurrent clients,
 * a real `tdp server` process), against the floor: the same rows inserted by a plain script with the same
 * driver, same concurrency, no HTTP and no validation.
 */
import { randomUUID } from 'node:crypto';
import { Pool } from 'undici';
import { newId } from '../packages/protocol/src/ids.ts';
import { connectDatabase } from '../packages/server/src/main.ts';
import { zipWorkflow } from '../test/fixtures.ts';
import { benchDatabase, describe, runLoad, sane, sized, startBenchServer } from './support.ts';

const concurrency = 16;
const total = sized('BENCH_CREATE_COUNT', 6000, 300);
const warmup = sized(null, 500, 50);

const definition = zipWorkflow();

/** Creates through a `tdp server` of its own over `databaseUrl` (also `bench -- growth`'s create). */
/** `env` adds to the server's environment. */
export async function measureHttp(databaseUrl: string, env: Record<string, string> = {}) {
  const server = await startBenchServer(databaseUrl, env);
  const base = server.base;
  const headers = { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' };
  await fetch(`${base}/v1/workflow-definitions`, {
    method: 'POST',
    headers,
    body: JSON.stringify(definition),
  });

  const pool = new Pool(base, { connections: concurrency });
  const run = randomUUID();
  const create = async (i: number) => {
    const response = await pool.request({
      method: 'POST',
      path: '/v1/tasks',
      headers: { ...headers, 'idempotency-key': `${run}-${i}` },
      body: JSON.stringify({
        workflowName: 'zip-clean-watermark',
        workflowVersion: '1',
        name: `Order ${i}`,
        externalRef: `order-${run}-${i}`,
        input: { sourceZip: `asset://${i}`, watermarkText: '© ACME' },
        callbackUrl: 'https://app.example/tdp/callback',
        priority: 50,
      }),
    });
    await response.body.text();
    if (response.statusCode !== 201) throw new Error(`POST /v1/tasks answered ${response.statusCode}`);
  };
  await runLoad(warmup, concurrency, (i) => create(total + i));
  const result = await runLoad(total, concurrency, create);
  await pool.close();
  await server.stop();
  return result;
}

/**
 * Where the rows one create writes are, found from its task `t`: every table a create can write (see
 * `createTask` and the fact session), each possibly empty. Domain outbox rows exist only with an event
 * bus (`domainEvents`), realtime rows only with a durable hand-off (none for the in-process gateway),
 * timers only for steps that have them. Rows of later facts are left out (time of the create, version 1).
 * The bench registers no worker, so a create places no step (no attempt, no worker command).
 */
const writtenByCreate: Record<string, string> = {
  workflow: 'x.id = t.workflow_id',
  task: 'x.id = t.id',
  execution: 'x.task_id = t.id AND x.created_at = t.created_at',
  step: 'x.task_id = t.id AND x.created_at = t.created_at',
  task_event: 'x.task_id = t.id AND x.task_version = 1',
  idempotency: "x.response_body->'task'->>'id' = t.id::text",
  outbox_event: 'x.aggregate_id = t.id AND x.created_at = t.created_at',
  realtime_outbox: `x.created_at = t.created_at AND EXISTS (
    SELECT 1 FROM jsonb_to_recordset(x.messages) AS m(aggregate_id uuid) WHERE m.aggregate_id IN (t.id, t.workflow_id))`,
  scheduling_request: 'x.task_id = t.id AND x.created_at = t.created_at',
  '"timer"': 'x.task_id = t.id AND x.created_at = t.created_at',
  callback_delivery: 'x.task_id = t.id AND x.created_at = t.created_at',
  timeline: 'x.task_id = t.id AND x.at = t.created_at',
};
/** Columns the server never writes (their default fills them). */
const defaulted = new Set(['position']);
/** Tables without which the HTTP phase cannot have created a task. */
const required = ['workflow', 'task', 'execution', 'step', 'task_event', 'idempotency'];

/**
 * The floor: the very rows one created task writes (those `writtenByCreate` finds for a task the server
 * created, and no others), with fresh ids and keys, in one pipelined transaction per task — no HTTP, no
 * validation.
 */
async function measureFloor(databaseUrl: string) {
  const sql = connectDatabase({ url: databaseUrl, maxConnections: concurrency });
  const tables = Object.entries(writtenByCreate);
  const [template] = await sql.unsafe(
    `SELECT ${tables
      .map(([table, where], n) => `ARRAY(SELECT to_jsonb(x) FROM ${table} x WHERE ${where}) AS r${n}`)
      .join(', ')}
     FROM task t ORDER BY t.id LIMIT 1`,
  );
  if (!template) throw new Error('no task to copy: the HTTP phase created none');
  const rows = tables
    .map(([table], n) => ({ table, rows: template[`r${n}`] as Record<string, unknown>[] }))
    .filter((t) => t.rows.length > 0);
  for (const table of required)
    sane(
      rows.some((t) => t.table === table),
      `the HTTP phase's task has no ${table} row`,
    );
  console.log(`  floor copies per task: ${rows.map((t) => `${t.table} ${t.rows.length}`).join(', ')}`);
  // Each row as JSON text, with its ids and the request's idempotency key (also in the workflow key and
  // the external reference) replaced by fresh ones for every copy.
  const copied = rows.flatMap(({ table, rows }) =>
    rows.map((row) => {
      const columns = Object.keys(row)
        .filter((c) => !defaulted.has(c))
        .map((c) => `"${c}"`)
        .join(', ');
      return {
        text: `INSERT INTO ${table} (${columns}) SELECT ${columns} FROM jsonb_populate_record(NULL::${table}, $1::text::jsonb)`,
        row: JSON.stringify(row),
      };
    }),
  );
  const ids = rows.flatMap((t) => t.rows.map((row) => row.id as string | undefined)).filter(Boolean);
  const key = rows.find((t) => t.table === 'idempotency')!.rows[0]!.key as string;
  // Ids and keys are hexadecimal and dashes: nothing to escape; a longer one is never cut short.
  const replaced = new RegExp(`(?:${[key, ...ids].join('|')})(?![0-9a-f-])`, 'g');
  const run = randomUUID();
  const create = async (i: number) => {
    const fresh = new Map<string, string>([[key, `${run}-${i}`]]);
    const rename = (old: string) => fresh.get(old) ?? fresh.set(old, newId()).get(old)!;
    await sql.begin((tx) =>
      copied.map(({ text, row }) =>
        tx.unsafe(text, [row.replace(replaced, rename)] as never, { prepare: true }),
      ),
    );
  };
  const counts = () =>
    Promise.all(
      rows.map(async (t) => Number((await sql.unsafe(`SELECT count(*) AS n FROM ${t.table}`))[0]!.n)),
    );
  const before = await counts();
  await runLoad(warmup, concurrency, (i) => create(total + i));
  const result = await runLoad(total, concurrency, create);
  const after = await counts();
  for (const [n, t] of rows.entries())
    sane(after[n]! - before[n]! === (warmup + total) * t.rows.length, `the floor's ${t.table} rows`);
  await sql.end();
  return result;
}

export async function benchCreate(): Promise<void> {
  const database = await benchDatabase();
  try {
    console.log(
      `create: ${total} tasks, ${concurrency} concurrent clients, PostgreSQL ${process.env.DATABASE_URL ? 'from DATABASE_URL' : 'embedded'}`,
    );
    const http = await measureHttp(database.url);
    console.log(`  POST /v1/tasks (HTTP, tdp server)   ${describe(http)}`);
    const floor = await measureFloor(database.url);
    console.log(`  floor (plain inserts, same driver)  ${describe(floor)}`);
    const ratio = http.perSecond / floor.perSecond;
    console.log(`  ratio HTTP / floor                  ${ratio.toFixed(2)}  (target >= 0.5)`);
  } finally {
    await database.close();
  }
}
