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
import { benchDatabase, describe, runLoad, startBenchServer } from './support.ts';

const concurrency = 16;
const total = Number(process.env.BENCH_CREATE_COUNT ?? 6000);
const warmup = 500;

const definition = zipWorkflow();

async function measureHttp(databaseUrl: string) {
  const server = await startBenchServer(databaseUrl);
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
 * The floor: the very rows one created task writes (workflow, task, execution, steps, event, idempotency
 * record, outbox event, projections), copied from a task the server created, with fresh ids, in one
 * pipelined transaction per task — no HTTP, no validation.
 */
async function measureFloor(databaseUrl: string) {
  const sql = connectDatabase({ url: databaseUrl, maxConnections: concurrency });
  const [tpl] = await sql`
    SELECT to_jsonb(w) AS workflow, to_jsonb(t) AS task, to_jsonb(e) AS execution, to_jsonb(v) AS event,
           to_jsonb(i) AS idempotency, to_jsonb(o) AS outbox,
           ARRAY(SELECT to_jsonb(s) FROM step s WHERE s.execution_id = t.current_execution_id) AS steps,
           ARRAY(SELECT to_jsonb(r) FROM realtime_outbox r WHERE r.aggregate_id IN (t.id, t.workflow_id)) AS realtime
    FROM task t
    JOIN workflow w ON w.id = t.workflow_id
    JOIN execution e ON e.id = t.current_execution_id
    JOIN task_event v ON v.task_id = t.id AND v.task_version = 1
    JOIN outbox_event o ON o.id = v.id
    JOIN idempotency i ON i.response_body->'task'->>'id' = t.id::text
    ORDER BY t.id LIMIT 1`;
  if (!tpl) throw new Error('no task to copy: the HTTP phase created none');
  const run = randomUUID();
  const insert = (tx: typeof sql, table: string, row: Record<string, unknown>) =>
    tx.unsafe(
      `INSERT INTO ${table} SELECT * FROM jsonb_populate_record(NULL::${table}, $1::jsonb)`,
      [row] as never,
      { prepare: true },
    );
  const create = async (i: number) => {
    const [workflowId, taskId, executionId, eventId] = [newId(), newId(), newId(), newId()];
    const key = `${run}-${i}`;
    await sql.begin((tx) => [
      insert(tx as never, 'workflow', {
        ...tpl.workflow,
        id: workflowId,
        client_workflow_key: `task:${key}`,
      }),
      insert(tx as never, 'task', {
        ...tpl.task,
        id: taskId,
        workflow_id: workflowId,
        current_execution_id: executionId,
        external_ref: key,
      }),
      insert(tx as never, 'execution', { ...tpl.execution, id: executionId, task_id: taskId }),
      ...(tpl.steps as Record<string, unknown>[]).map((step) =>
        insert(tx as never, 'step', { ...step, id: newId(), task_id: taskId, execution_id: executionId }),
      ),
      insert(tx as never, 'task_event', {
        ...tpl.event,
        id: eventId,
        task_id: taskId,
        execution_id: executionId,
        workflow_id: workflowId,
      }),
      insert(tx as never, 'idempotency', { ...tpl.idempotency, key }),
      insert(tx as never, 'outbox_event', { ...tpl.outbox, id: eventId, aggregate_id: taskId }),
      ...(tpl.realtime as Record<string, unknown>[]).map((row) =>
        insert(tx as never, 'realtime_outbox', {
          ...row,
          id: newId(),
          aggregate_id: row.aggregate_type === 'TASK' ? taskId : workflowId,
        }),
      ),
    ]);
  };
  await runLoad(warmup, concurrency, (i) => create(total + i));
  const result = await runLoad(total, concurrency, create);
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
