/**
 * `npm run bench -- growth`: does TDP slow down as its tables grow? One PostgreSQL, two databases: one
 * filled with 1,000,000 finished tasks (BENCH_GROWTH_TASKS; smoke: 20,000) with all their rows —
 * workflow, task, execution, step, attempt, events, dedup, outbox, timeline… — and one empty. The
 * `create` and `events` benches' measurements (their own code) run against both in the same run; the
 * target is the filled database within 20% of the empty one.
 *
 * The fill copies the rows of one task that really ran to its end through a `tdp server` (so it holds
 * whatever the server writes today), in bulk SQL: each copy gets its own ids (md5 of the template id
 * and the copy number, so references between the rows stay consistent), its own unique keys, and its
 * times moved back by a few seconds per copy (a month of history at full size).
 */
import { Pool } from 'undici';
import { startTemporaryPostgres } from '../packages/cli/src/embeddedPostgres.ts';
import { newId } from '../packages/protocol/src/ids.ts';
import { connectDatabase } from '../packages/server/src/main.ts';
import { measureHttp } from './create.ts';
import { measureEventLoads, prepare } from './events.ts';
import { benchDatabase, describe, type LoadResult, sane, sized, startBenchServer } from './support.ts';

type Sql = ReturnType<typeof connectDatabase>;

const TASKS = sized('BENCH_GROWTH_TASKS', 1_000_000, 20_000);
/** Copies per INSERT statement: progress to print, and no transaction of millions of rows. */
const CHUNK = 50_000;
/** How far back each copy's times move (1,000,000 copies: about a month). */
const SECONDS_PER_COPY = 2.5;
/**
 * The servers measured run no retention sweep: its walk of a filled database is its own cost, which
 * `npm run bench -- sweep` measures on a loaded server; here, only what the tables' size costs.
 */
const SERVER_ENV = { TDP_RETENTION_SWEEP: 'off' };
/** Measuring rounds per database (the order flips each round). */
const ROUNDS = sized('BENCH_GROWTH_ROUNDS', 3, 1);
const EVENT_SIZES = {
  tasks: sized(null, 200, 20),
  events: sized('BENCH_GROWTH_EVENTS', 10_000, 500),
  heartbeats: sized('BENCH_GROWTH_HEARTBEATS', 100_000, 2_500),
};

/** Runs one task to its end through the server: created, its step run and succeeded, completed. */
export async function finishedTask(databaseUrl: string): Promise<string> {
  const server = await startBenchServer(databaseUrl);
  const pool = new Pool(server.base, { connections: 1 });
  try {
    const [e] = await prepare(pool, server.apiKey, 1, 1, 1);
    const post = async (body: Record<string, unknown>) => {
      const response = await pool.request({
        method: 'POST',
        path: '/v1/task-events',
        headers: { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ eventId: newId(), ...body }),
      });
      const text = await response.body.text();
      if (response.statusCode !== 200) throw new Error(`event answered ${response.statusCode}: ${text}`);
    };
    await post({
      executionHandle: e!.handle,
      eventType: 'STEP_PROGRESS',
      sourceSeq: 2,
      progress: { percent: 50 },
    });
    await post({ executionHandle: e!.handle, eventType: 'STEP_COMPLETED', sourceSeq: 3 });
    await post({
      taskId: e!.taskId,
      producerId: 'bench-coordinator',
      eventType: 'TASK_COMPLETED',
      sourceSeq: 1,
    });
    return e!.taskId;
  } finally {
    await pool.close();
    await server.stop();
  }
}

/** Tables of rows waiting to be delivered (relays and callbacks claim them). */
const deliveryTables = new Set(['outbox_event', 'realtime_outbox', 'callback_delivery']);

/**
 * A copy of a finished task is history: what it had to deliver was delivered long ago. The template's
 * last rows may still be waiting when its server stopped; copied as they are, a million of them would
 * be a relay backlog, not a big database.
 */
function settled(table: string, row: Record<string, unknown>): Record<string, unknown> {
  if (!deliveryTables.has(table) || row.status === 'PUBLISHED') return row;
  return {
    ...row,
    status: 'PUBLISHED',
    published_at: row.created_at,
    claim_id: null,
    claim_expires_at: null,
  };
}

interface ColumnInfo {
  name: string;
  type: string;
  defaulted: boolean;
  unique: boolean;
}

/** The rows of the task `taskId` in every table, found by the columns that name a task or aggregate. */
async function templateRows(sql: Sql, taskId: string) {
  const [task] = await sql`SELECT id, workflow_id FROM task WHERE id = ${taskId}`;
  const owners = [taskId, task!.workflow_id as string].filter(Boolean);
  const tables = await sql<{ table_name: string; column_name: string }[]>`
    SELECT table_name, column_name FROM information_schema.columns
    WHERE table_schema = 'public' AND column_name IN ('task_id', 'aggregate_id') AND table_name <> 'execution_lease'
      AND table_name IN (SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE')`;
  const found: { table: string; rows: Record<string, unknown>[] }[] = [
    { table: 'workflow', rows: await sql`SELECT * FROM workflow WHERE id = ${owners[1] ?? null}` },
    { table: 'task', rows: await sql`SELECT * FROM task WHERE id = ${taskId}` },
  ];
  for (const { table_name, column_name } of tables) {
    const rows = await sql.unsafe(`SELECT * FROM "${table_name}" WHERE "${column_name}" = ANY($1::uuid[])`, [
      owners,
    ]);
    if (rows.length > 0) found.push({ table: table_name, rows: [...rows] });
  }
  // Parents before children (for the order of the inserts; foreign keys are off during the fill).
  const order = ['workflow', 'task', 'execution', 'step', 'attempt'];
  const rank = (t: string) => (order.includes(t) ? order.indexOf(t) : order.length);
  return found.sort((a, b) => rank(a.table) - rank(b.table) || a.table.localeCompare(b.table));
}

async function columnsOf(sql: Sql, table: string): Promise<ColumnInfo[]> {
  const rows = await sql<{ name: string; type: string; defaulted: boolean; unique: boolean }[]>`
    SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
           (a.attidentity <> '' OR pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval%') AS defaulted,
           EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisunique
                   AND a.attnum = ANY(i.indkey)) AS unique
    FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE a.attrelid = ${table}::regclass AND a.attnum > 0 AND NOT a.attisdropped
    ORDER BY a.attnum`;
  return rows.map((r) => ({ ...r, defaulted: Boolean(r.defaulted) }));
}

const literal = (value: string) => `'${value.replace(/'/g, "''")}'`;

/**
 * The expression of one column of copy `i`: template ids become the copy's ids (in uuid, text and json
 * columns alike), unique text and bytea values get the copy number, times move back.
 */
function copyExpression(
  column: ColumnInfo,
  value: unknown,
  ids: string[],
  backSeconds: number,
): string | null {
  if (column.defaulted) return null;
  const mapped = (id: string) => `md5(${literal(id)} || ':' || i)::uuid`;
  if (value === null || value === undefined) return `NULL::${column.type}`;
  if (column.type === 'uuid')
    return ids.includes(value as string) ? mapped(value as string) : literal(value as string);
  if (column.type.startsWith('timestamp'))
    return `${literal((value as Date).toISOString())}::timestamptz - make_interval(secs => ${backSeconds} + i * ${SECONDS_PER_COPY})`;
  if (column.type === 'bytea') {
    const hex = `'\\x${(value as Buffer).toString('hex')}'::bytea`;
    return column.unique ? `sha256(${hex} || int4send(i))` : hex;
  }
  const text = column.type === 'jsonb' || column.type === 'json' ? JSON.stringify(value) : String(value);
  const arrayText =
    Array.isArray(value) && column.type.endsWith('[]')
      ? `{${value.map((v) => `"${String(v).replace(/(["\\])/g, '\\$1')}"`).join(',')}}`
      : null;
  let expression = literal(arrayText ?? (value instanceof Date ? value.toISOString() : text));
  for (const id of ids.filter((id) => text.includes(id)))
    expression = `replace(${expression}, ${literal(id)}, md5(${literal(id)} || ':' || i)::text)`;
  if (column.unique && (column.type === 'text' || column.type.startsWith('character')))
    expression = `${expression} || '#' || i`;
  return `(${expression})::${column.type}`;
}

/**
 * Fills the database with `copies` copies of the finished task `taskId`, each `backSeconds` plus a few
 * seconds per copy older than the template; the rows written per table.
 */
export async function fill(
  sql: Sql,
  taskId: string,
  copies: number,
  backSeconds = 0,
): Promise<Map<string, number>> {
  const template = await templateRows(sql, taskId);
  const ids = template
    .flatMap((t) => t.rows.map((r) => r.id as string))
    .filter((id) => typeof id === 'string');
  const statements: { table: string; text: string }[] = [];
  for (const { table, rows } of template) {
    const columns = await columnsOf(sql, table);
    for (const row of rows.map((r) => settled(table, r))) {
      const picked = columns
        .map((c) => ({ c, expression: copyExpression(c, row[c.name], ids, backSeconds) }))
        .filter((p): p is { c: ColumnInfo; expression: string } => p.expression !== null);
      statements.push({
        table,
        text: `INSERT INTO "${table}" (${picked.map((p) => `"${p.c.name}"`).join(', ')})
               SELECT ${picked.map((p) => p.expression).join(', ')} FROM generate_series($1::int, $2::int) AS i`,
      });
    }
  }
  const written = new Map<string, number>();
  for (let from = 1; from <= copies; from += CHUNK) {
    const to = Math.min(copies, from + CHUNK - 1);
    await sql.begin(async (tx) => {
      // A bulk load: no trigger and no foreign key check per row (the copies reference each other).
      await tx`SET LOCAL session_replication_role = replica`;
      for (const s of statements) await tx.unsafe(s.text, [from, to]);
    });
    for (const s of statements) written.set(s.table, (written.get(s.table) ?? 0) + (to - from + 1));
    if (copies > CHUNK) process.stdout.write(`\r  filling: ${to} of ${copies} tasks`);
  }
  if (copies > CHUNK) process.stdout.write('\n');
  return written;
}

/** The round with the median rate (of an even count, the lower middle one). */
const median = (results: LoadResult[]) =>
  [...results].sort((x, y) => x.perSecond - y.perSecond)[Math.floor((results.length - 1) / 2)]!;
const within = (filled: LoadResult, empty: LoadResult) => filled.perSecond / empty.perSecond;
const verdict = (r: number) => `${r.toFixed(2)} (target >= 0.80)`;

export async function benchGrowth(): Promise<void> {
  const postgres = process.env.DATABASE_URL ? null : await startTemporaryPostgres();
  const adminUrl = process.env.DATABASE_URL ?? postgres!.adminUrl;
  const empty = await benchDatabase(adminUrl);
  const filled = await benchDatabase(adminUrl);
  // The fill's statements and VACUUM run for minutes: no statement timeout, no answer deadline.
  const sql = connectDatabase({
    url: filled.url,
    maxConnections: 1,
    statementTimeoutMs: 0,
    answerDeadlineMs: 3_600_000,
  });
  try {
    console.log(
      `growth: ${TASKS} finished tasks against an empty database, PostgreSQL ${postgres ? 'embedded' : 'from DATABASE_URL'}, retention sweep off (bench sweep measures it)`,
    );
    const started = performance.now();
    const taskId = await finishedTask(filled.url);
    const written = await fill(sql, taskId, TASKS);
    await sql`VACUUM ANALYZE`;
    const [size] = await sql`SELECT pg_size_pretty(pg_database_size(current_database())) AS size`;
    const [{ n }] = (await sql`SELECT count(*)::int AS n FROM task WHERE lifecycle_status = 'SUCCEEDED'`) as [
      { n: number },
    ];
    sane(n === TASKS + 1, `the filled database holds ${n} finished tasks, not ${TASKS + 1}`);
    console.log(
      `  filled in ${((performance.now() - started) / 1000).toFixed(0)} s (${size!.size}): ${[...written]
        .map(([table, rows]) => `${table} ${rows}`)
        .join(', ')}`,
    );
    await filled.checkpoint();

    // Rounds of both databases, the order flipped each round, and each side's median: on a shared
    // machine the load drifts during a run, and neither database should gain from its place in it.
    const runs: Record<
      'empty' | 'filled',
      { create: LoadResult[]; batch: LoadResult[]; heartbeats: LoadResult[] }
    > = {
      empty: { create: [], batch: [], heartbeats: [] },
      filled: { create: [], batch: [], heartbeats: [] },
    };
    for (let round = 0; round < ROUNDS; round += 1) {
      const order = round % 2 === 0 ? (['empty', 'filled'] as const) : (['filled', 'empty'] as const);
      for (const side of order) {
        const url = side === 'empty' ? empty.url : filled.url;
        runs[side].create.push(await measureHttp(url, SERVER_ENV));
        const events = await measureEventLoads(url, EVENT_SIZES, SERVER_ENV);
        runs[side].batch.push(events.batch);
        runs[side].heartbeats.push(events.heartbeats);
      }
    }
    const rows: [string, 'create' | 'batch' | 'heartbeats'][] = [
      ['create (POST /v1/tasks)   ', 'create'],
      ['events (batch of 100)     ', 'batch'],
      ['heartbeats (batch of 250) ', 'heartbeats'],
    ];
    console.log(`  ${ROUNDS} rounds each, the median round per database:`);
    for (const [name, measure] of rows) {
      const e = median(runs.empty[measure]);
      const f = median(runs.filled[measure]);
      const each = (side: 'empty' | 'filled') =>
        runs[side][measure].map((r) => r.perSecond.toFixed(0)).join(', ');
      console.log(`  ${name} empty   ${describe(e)}  rounds ${each('empty')}/s`);
      console.log(`  ${name} filled  ${describe(f)}  rounds ${each('filled')}/s`);
      console.log(`  ${name} ratio filled/empty ${verdict(within(f, e))}`);
    }
  } finally {
    // The embedded PostgreSQL stops even if dropping a database fails (a big one can outlast a timeout).
    await Promise.allSettled([sql.end(), filled.close(), empty.close()]);
    await postgres?.stop();
  }
}
