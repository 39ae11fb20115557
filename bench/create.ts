/**
 * `npm run bench -- create`: tasks created per second through POST /v1/tasks (HTTP, 16 concurrent clients,
 * a real `tdp server` process), against the floor: the same rows inserted by a plain script with the same
 * driver, same concurrency, no HTTP and no validation.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Pool } from 'undici';
import { v7 } from 'uuid';
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

/** The same rows per task (idempotency, task, execution, 2 steps, event, outbox) in one pipelined transaction. */
async function measureFloor(databaseUrl: string) {
  const sql = connectDatabase({ url: databaseUrl, maxConnections: concurrency });
  const [app] = await sql`SELECT a.id, a.tenant_id FROM application a LIMIT 1`;
  const [def] = await sql`SELECT id FROM workflow_definition LIMIT 1`;
  // Rows as large as the server's: reuse a real snapshot, response body and event payloads as templates.
  const [template] = await sql`
    SELECT e.snapshot, i.response_body, ev.payload AS event_payload, o.payload AS outbox_payload
    FROM execution e JOIN task t ON t.id = e.task_id
    JOIN idempotency i ON i.response_body->'task'->>'id' = t.id::text
    JOIN task_event ev ON ev.task_id = t.id JOIN outbox_event o ON o.id = ev.id
    LIMIT 1`;
  const run = randomUUID();
  const insert = async (i: number) => {
    const now = new Date();
    const taskId = v7();
    const executionId = v7();
    const eventId = v7();
    const input = { sourceZip: `asset://${i}`, watermarkText: '© ACME' };
    await sql.begin((tx) => [
      tx`INSERT INTO idempotency (principal, operation, key, request_hash, response_status, response_body, created_at)
         VALUES (${`application:${app!.id}`}, 'task.create', ${`${run}-${i}`}, ${randomBytes(32).toString('hex')}, 201,
                 ${tx.json({ ...template!.response_body, task: { ...template!.response_body.task, id: taskId } })}, ${now})`,
      tx`INSERT INTO task (id, tenant_id, application_id, workflow_definition_id, workflow_name, workflow_version, name,
                           external_ref, input, callback_url, priority, owner_id, lifecycle_status, version,
                           current_execution_id, created_at, updated_at)
         VALUES (${taskId}, ${app!.tenant_id}, ${app!.id}, ${def!.id}, 'zip-clean-watermark', '1', ${`Order ${i}`},
                 ${`floor-${run}-${i}`}, ${tx.json(input)}, 'https://app.example/tdp/callback', 50, null, 'PENDING', 1,
                 ${executionId}, ${now}, ${now})`,
      tx`INSERT INTO execution (id, task_id, number, status, progress, snapshot, version, created_at, updated_at)
         VALUES (${executionId}, ${taskId}, 1, 'CREATED', 0, ${tx.json(template!.snapshot)}, 1, ${now}, ${now})`,
      tx`INSERT INTO step (id, execution_id, step_key, capability, capability_version, depends_on, status, version, created_at, updated_at)
         VALUES (${v7()}, ${executionId}, 'clean', 'archive.clean', '1', '{}', 'WAITING', 1, ${now}, ${now}),
                (${v7()}, ${executionId}, 'watermark', 'image.watermark', '2', '{clean}', 'WAITING', 1, ${now}, ${now})`,
      tx`INSERT INTO task_event (id, task_id, execution_id, task_version, type, producer, payload, occurred_at, committed_at)
         VALUES (${eventId}, ${taskId}, ${executionId}, 1, 'execution.created', 'bench', ${tx.json(template!.event_payload)}, ${now}, ${now})`,
      tx`INSERT INTO outbox_event (id, tenant_id, application_id, aggregate_id, event_type, payload, available_at, created_at)
         VALUES (${eventId}, ${app!.tenant_id}, ${app!.id}, ${taskId}, 'execution.created', ${tx.json({ ...template!.outbox_payload, id: eventId, taskId })}, ${now}, ${now})`,
    ]);
  };
  await runLoad(warmup, concurrency, (i) => insert(total + i));
  const result = await runLoad(total, concurrency, insert);
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
