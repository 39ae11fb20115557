/**
 * Reads that must cost what is open, not what ever was: the tasks-in-flight quota count and the retry
 * of requests deferred for want of a worker, planned on a database holding thousands of finished tasks
 * and dispatched requests (after ANALYZE), must go by their own index (the statements are the ones the
 * stores send, captured from the driver); and a report's step read must look each step's lease up by
 * its key, not scan the lease table (or its index) once per step.
 */
import { newId } from '@tdp/protocol';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import type { Sql } from '../src/adapters/outbound/postgres/database.ts';
import { beginStatusTransaction } from '../src/adapters/outbound/postgres/factStore.ts';
import { PostgresTaskStore } from '../src/adapters/outbound/postgres/taskStore.ts';
import { currentStepsOfTasks } from '../src/adapters/outbound/postgres/transactionReads.ts';
import { PostgresWorkerStore } from '../src/adapters/outbound/postgres/workerStore.ts';

let h: Harness;
let sql: postgres.Sql;
let app: Awaited<ReturnType<Harness['createApplication']>>;
const sent: { query: string; params: unknown[] }[] = [];

beforeAll(async () => {
  h = await startHarness({ runLoops: false });
  sql = postgres(h.databaseUrl, {
    max: 1,
    onnotice: () => {},
    debug: (_connection, query, params) => sent.push({ query, params: params as unknown[] }),
  });
  app = await h.createApplication(`plans-${newId()}`);
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: zipWorkflow(),
  });
  expect(published.status).toBe(201);
  // One open task (no worker serves its capabilities: it waits), with its scheduling request.
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: {
      workflowName: 'zip-clean-watermark',
      workflowVersion: '1',
      name: 'open',
      input: { sourceZip: 'asset://a1' },
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  // History: 5,000 finished tasks of the same application, steps of others, and dispatched requests.
  await sql`
    INSERT INTO task
    SELECT (jsonb_populate_record(t, jsonb_build_object(
      'id', gen_random_uuid(), 'client_task_key', 'history-' || gen_random_uuid(),
      'lifecycle_status', 'SUCCEEDED'))).*
    FROM task t, generate_series(1, 5000)
    WHERE t.application_id = ${app.applicationId}`;
  await sql`
    INSERT INTO scheduling_request
    SELECT (jsonb_populate_record(r, jsonb_build_object(
      'id', gen_random_uuid(), 'step_id', gen_random_uuid(), 'status', 'DISPATCHED',
      'reasons', '["no worker"]'::jsonb))).*
    FROM scheduling_request r JOIN task t ON t.id = r.task_id, generate_series(1, 5000)
    WHERE t.application_id = ${app.applicationId} AND r.status = 'PENDING'`;
  await sql`
    INSERT INTO step
    SELECT (jsonb_populate_record(s, jsonb_build_object(
      'id', gen_random_uuid(), 'task_id', gen_random_uuid(), 'execution_id', gen_random_uuid(),
      'attempt_id', gen_random_uuid(), 'status', 'SUCCEEDED'))).*
    FROM step s JOIN task t ON t.id = s.task_id, generate_series(1, 5000)
    WHERE t.application_id = ${app.applicationId}`;
  await sql`ANALYZE step`;
  await sql`ANALYZE task`;
  await sql`ANALYZE scheduling_request`;
}, 60_000);

afterAll(async () => {
  if (sql) {
    // The copies belong to nothing else (the harness checks references when it drops the database).
    await sql`DELETE FROM scheduling_request WHERE step_id NOT IN (SELECT id FROM step)`;
    await sql`DELETE FROM task WHERE client_task_key LIKE 'history-%'`;
    await sql`DELETE FROM step WHERE task_id NOT IN (SELECT id FROM task)`;
    await sql.end();
  }
  await h?.close();
});

/** The plan of the last statement `run` sent, as JSON text. */
async function planOf(run: () => Promise<unknown>): Promise<string> {
  sent.length = 0;
  await run();
  const statement = sent.at(-1)!;
  const [row] = await sql.unsafe(`EXPLAIN (FORMAT JSON) ${statement.query}`, statement.params as never[]);
  return JSON.stringify(row!['QUERY PLAN']);
}

describe('reads of open work on a database with history', () => {
  it('the tasks-in-flight count goes by the index of open tasks', async () => {
    const store = new PostgresTaskStore(sql as unknown as Sql);
    expect(await store.inFlight(app.applicationId, 100)).toEqual({ count: 1, limit: 100 });
    const plan = await planOf(() => store.inFlight(app.applicationId, 100));
    expect(plan).toContain('"Index Name":"task_in_flight"');
  });

  it('the retry of deferred requests goes by the index of deferred ones', async () => {
    const store = new PostgresWorkerStore(sql as unknown as Sql);
    const plan = await planOf(() => store.retryDeferred(new Date()));
    expect(plan).toContain('"Index Name":"scheduling_request_deferred"');
    expect(plan).not.toContain('Seq Scan');
  });

  it("a report's step read looks each step's lease up by key, in the status transaction's plan", async () => {
    const [open] = await sql<{ id: string }[]>`
      SELECT id FROM task WHERE application_id = ${app.applicationId} AND lifecycle_status = 'PENDING'`;
    // Leases come and go: after a burst, vacuumed while empty, the table has no pages and its index many.
    await sql`
      INSERT INTO execution_lease (attempt_id, task_id, health, leased_at)
      SELECT gen_random_uuid(), gen_random_uuid(), 'HEALTHY', now() FROM generate_series(1, 20000)`;
    await sql`DELETE FROM execution_lease`;
    await sql`VACUUM ANALYZE execution_lease`;
    const reserved = await sql.reserve();
    try {
      // The plan a connection keeps: made once (generic), here while the lease table is empty.
      await reserved.unsafe(beginStatusTransaction);
      await reserved.unsafe(`PREPARE steps_of_tasks (uuid[]) AS ${currentStepsOfTasks}`);
      const [row] = await reserved.unsafe(`EXPLAIN (FORMAT JSON) EXECUTE steps_of_tasks('{${open!.id}}')`);
      const plan = JSON.stringify(row!['QUERY PLAN']);
      expect(plan).toContain('"Index Name":"execution_lease_pkey"');
      expect(plan).toContain('"Index Cond":"(attempt_id = s.attempt_id)"');
    } finally {
      await reserved.unsafe('ROLLBACK');
      reserved.release();
    }
  });
});
