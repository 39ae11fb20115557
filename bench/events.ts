/**
 * `npm run bench -- events`: accepted status events per second through POST /v1/task-events:batch
 * (batches of 100) and single POST /v1/task-events (32 concurrent clients) over 1,000 tasks, a hot task
 * (every event on one task), and heartbeat items per second through the batch endpoint; the same
 * progress events over gRPC `Report` streams (one per batch client, each execution bound once, a
 * latency per event from send to its answer), against the REST batch. In the same run, the floor: the
 * same transaction's statements issued directly with the same driver.
 */
import { createHash, randomUUID } from 'node:crypto';
import { Pool } from 'undici';
import { eventMessageOf } from '../packages/protocol/src/grpc.ts';
import { newId } from '../packages/protocol/src/ids.ts';
import { heartbeatSession } from '../packages/server/src/adapters/outbound/postgres/leaseTables.ts';
import { connectDatabase } from '../packages/server/src/main.ts';
import { ReportStreamClient, reportingClient } from '../packages/worker/src/grpcReporting.ts';
import {
  benchDatabase,
  describe,
  type LoadResult,
  mergeLoads,
  percentile,
  runLoad,
  sized,
  startBenchServer,
} from './support.ts';

const TASKS = sized(null, 1000, 100);
const BATCH = 100;
const SINGLE_CLIENTS = 32;
const BATCH_CLIENTS = 4;
const BATCH_EVENTS = sized('BENCH_EVENTS_BATCH', 20_000, 2_000);
const SINGLE_EVENTS = sized('BENCH_EVENTS_SINGLE', 6_000, 600);
const HOT_EVENTS = sized('BENCH_EVENTS_HOT', 3_000, 300);
const HEARTBEAT_ITEMS = sized('BENCH_HEARTBEATS', 200_000, 10_000);
const HEARTBEAT_BATCH = 250;
const HEARTBEAT_WARMUP = sized(null, 10_000, 1_000);
/** Events a gRPC stream has in flight at once (within the server's window, `grpcStreamWindow`). */
const STREAM_IN_FLIGHT = 100;

export interface Execution {
  taskId: string;
  executionId: string;
  handle: string;
  seq: number;
  beat: number;
}

type Sql = ReturnType<typeof connectDatabase>;

async function json(pool: Pool, method: 'POST' | 'GET', path: string, apiKey: string, body?: unknown) {
  const response = await pool.request({
    method,
    path,
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.body.text();
  if (response.statusCode >= 300)
    throw new Error(`${method} ${path} answered ${response.statusCode}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

/** Tasks with one running step each (or one task with many), activated and started. */
export async function prepare(
  pool: Pool,
  apiKey: string,
  workflows: number,
  tasksPer: number,
  stepsPer: number,
): Promise<Execution[]> {
  const executions: Execution[] = [];
  for (let w = 0; w < workflows; w += 1) {
    const wf = await json(pool, 'POST', '/v1/workflows', apiKey, {
      clientWorkflowKey: `bench-${randomUUID()}`,
      ownerId: `user-${w}`,
      title: `Bench ${w}`,
      initialTasks: Array.from({ length: tasksPer }, (_, t) => ({
        clientTaskKey: `t${t}`,
        title: `Task ${t}`,
        knownSteps: Array.from({ length: stepsPer }, (_, s) => ({
          stepId: `s${s}`,
          operationCode: 'BENCH.WORK',
          expectedProducer: 'bench-worker',
          heartbeatTimeoutSeconds: 3600,
        })),
      })),
    });
    const pairs = wf.tasks.flatMap((t: { taskId: string }) =>
      Array.from({ length: stepsPer }, (_, s) => ({ taskId: t.taskId, step: `s${s}` })),
    );
    await runLoad(pairs.length, 16, async (i) => {
      const { taskId, step } = pairs[i]!;
      const ctx = await json(pool, 'POST', `/v1/tasks/${taskId}/steps/${step}:activate`, apiKey);
      executions.push({ taskId, executionId: ctx.executionId, handle: ctx.executionHandle, seq: 0, beat: 0 });
    });
  }
  await runLoad(executions.length, 16, async (i) => {
    const e = executions[i]!;
    e.seq += 1;
    await json(pool, 'POST', '/v1/task-events', apiKey, {
      executionHandle: e.handle,
      eventId: newId(),
      eventType: 'STEP_STARTED',
      sourceSeq: e.seq,
    });
  });
  return executions;
}

export const progressEvent = (e: Execution) => {
  e.seq += 1;
  return {
    executionHandle: e.handle,
    eventId: newId(),
    eventType: 'STEP_PROGRESS',
    sourceSeq: e.seq,
    progress: { percent: Math.min(99, e.seq % 100) },
  };
};

/** Splits `items` into `parts` disjoint slices (each client owns its executions: sequences stay ordered). */
const partition = <T>(items: T[], parts: number) =>
  Array.from({ length: parts }, (_, p) => items.filter((_, i) => i % parts === p));

export async function httpBatches(
  pool: Pool,
  apiKey: string,
  executions: Execution[],
  total: number,
): Promise<LoadResult> {
  const groups = partition(executions, BATCH_CLIENTS);
  const cursors = groups.map(() => 0);
  const batches = Math.ceil(total / BATCH);
  const result = await runLoad(batches, BATCH_CLIENTS, async (_i, client) => {
    const group = groups[client]!;
    const events = Array.from({ length: BATCH }, () =>
      progressEvent(group[cursors[client]!++ % group.length]!),
    );
    const answer = await json(pool, 'POST', '/v1/task-events:batch', apiKey, { events });
    const refused = answer.results.filter((r: { ok: boolean }) => !r.ok);
    if (refused.length > 0) throw new Error(`batch refused ${refused.length}: ${JSON.stringify(refused[0])}`);
  });
  return { ...result, count: batches * BATCH, perSecond: (batches * BATCH) / result.seconds };
}

/**
 * The REST batch's events over gRPC: one stream per batch client, each with its own executions (bound
 * once, before the clock starts), STREAM_IN_FLIGHT events unanswered at a time.
 */
async function grpcStreams(
  address: string,
  apiKey: string,
  executions: Execution[],
  total: number,
): Promise<LoadResult> {
  const groups = partition(executions, BATCH_CLIENTS);
  const clients = groups.map(() => reportingClient(address));
  const streams = clients.map((client) => new ReportStreamClient(client, apiKey));
  const keys = await Promise.all(
    groups.map((group, g) =>
      Promise.all(
        group.map(
          async (e) => (await streams[g]!.bind({ executionHandle: e.handle })).bound!.streamExecutionKey,
        ),
      ),
    ),
  );
  const latencies: number[] = [];
  const quota = Math.ceil(total / BATCH_CLIENTS);
  const started = performance.now();
  await Promise.all(
    groups.map(async (group, g) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: STREAM_IN_FLIGHT }, async () => {
          while (next < quota) {
            const i = next++;
            const member = i % group.length;
            const body = progressEvent(group[member]!);
            const t0 = performance.now();
            const answer = await streams[g]!.event(keys[g]![member]!, eventMessageOf(body));
            if (!answer.event) throw new Error(`stream refused: ${JSON.stringify(answer.problem)}`);
            latencies.push(performance.now() - t0);
          }
        }),
      );
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  for (const stream of streams) stream.close();
  for (const client of clients) client.close();
  latencies.sort((a, b) => a - b);
  const count = quota * BATCH_CLIENTS;
  return {
    count,
    seconds,
    perSecond: count / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    latencies,
  };
}

async function httpSingles(
  pool: Pool,
  apiKey: string,
  executions: Execution[],
  total: number,
  clients: number,
): Promise<LoadResult> {
  const groups = partition(executions, clients);
  const cursors = groups.map(() => 0);
  const busy = groups.map(() => false);
  return runLoad(total, clients, async () => {
    const client = busy.indexOf(false);
    busy[client] = true;
    const group = groups[client]!;
    try {
      await json(
        pool,
        'POST',
        '/v1/task-events',
        apiKey,
        progressEvent(group[cursors[client]!++ % group.length]!),
      );
    } finally {
      busy[client] = false;
    }
  });
}

export async function httpHeartbeats(
  pool: Pool,
  apiKey: string,
  executions: Execution[],
  total: number,
): Promise<LoadResult> {
  const groups = partition(executions, BATCH_CLIENTS);
  const requests = Math.ceil(total / HEARTBEAT_BATCH);
  const offsets = groups.map(() => 0);
  const result = await runLoad(requests, BATCH_CLIENTS, async (_i, client) => {
    const group = groups[client]!;
    const items = Array.from({ length: HEARTBEAT_BATCH }, () => {
      const e = group[offsets[client]!++ % group.length]!;
      e.beat += 1;
      return { executionHandle: e.handle, heartbeatSeq: e.beat };
    });
    // Like the worker, the bench asks only for the beats not plainly accepted.
    const answer = await json(pool, 'POST', '/v1/task-heartbeats:batch', apiKey, {
      heartbeats: items,
      answer: 'exceptions',
    });
    if (answer.results.length > 0 || answer.acceptedCount !== items.length)
      throw new Error(
        `heartbeats not accepted ${answer.results.length}: ${JSON.stringify(answer.results[0])}`,
      );
  });
  return {
    ...result,
    count: requests * HEARTBEAT_BATCH,
    perSecond: (requests * HEARTBEAT_BATCH) / result.seconds,
  };
}

/**
 * The floor for one event: the statements of the fact transaction, issued directly — lock the task,
 * read its execution, steps, credential, dedup and ACL, then update step, lease and task and insert the
 * event, dedup record, outbox event and two projections.
 */
async function floorEvent(tx: Sql, e: Execution, tenantId: string, applicationId: string) {
  e.seq += 1;
  const now = new Date();
  const eventId = newId();
  const [task] = await tx`SELECT * FROM task WHERE id = ${e.taskId} FOR UPDATE`;
  await Promise.all([
    tx`SELECT * FROM execution WHERE id = ${task!.current_execution_id}`,
    tx`SELECT s.*, l.heartbeat_seq, l.last_heartbeat_at FROM step s LEFT JOIN execution_lease l ON l.attempt_id = s.attempt_id
       WHERE s.execution_id = ${task!.current_execution_id} ORDER BY s.id`,
  ]);
  await tx`SELECT * FROM attempt WHERE handle_hash = ${createHash('sha256').update(e.handle).digest()}`;
  await tx`SELECT * FROM event_dedup WHERE event_id = ${eventId}`;
  await tx`SELECT principal_type, principal_id, permission FROM task_acl WHERE task_id = ${e.taskId} AND revoked_at IS NULL`;
  const version = BigInt(task!.version) + 1n;
  const payload = {
    taskId: e.taskId,
    taskVersion: version.toString(),
    lifecycleStatus: 'RUNNING',
    progress: e.seq % 100,
  };
  await Promise.all([
    tx`UPDATE step SET version = version + 1, progress = ${tx.json({ percent: e.seq % 100 })}, source_seqs = ${tx.json({ 'bench-worker': e.seq })},
                       last_heartbeat_at = ${now}, updated_at = ${now} WHERE attempt_id = ${e.executionId}`,
    tx`UPDATE task SET version = ${version}, updated_at = ${now} WHERE id = ${e.taskId}`,
    tx`UPDATE execution_lease SET last_heartbeat_at = ${now} WHERE attempt_id = ${e.executionId}`,
    tx`INSERT INTO task_event (id, task_id, execution_id, task_version, type, producer, payload, occurred_at, committed_at, received_at, source_seq)
       VALUES (${eventId}, ${e.taskId}, ${task!.current_execution_id}, ${version}, 'STEP_PROGRESS', 'bench-worker', ${tx.json({ progress: { percent: e.seq % 100 } })}, ${now}, ${now}, ${now}, ${e.seq})`,
    tx`INSERT INTO event_dedup (event_id, task_id, payload_hash, result, created_at) VALUES (${eventId}, ${e.taskId}, 'h', ${tx.json(payload)}, ${now})`,
    tx`INSERT INTO outbox_event (id, tenant_id, application_id, aggregate_id, event_type, payload, available_at, created_at)
       VALUES (${eventId}, ${tenantId}, ${applicationId}, ${e.taskId}, 'STEP_PROGRESS', ${tx.json(payload)}, ${now}, ${now})`,
    tx`INSERT INTO realtime_outbox (id, messages, available_at, created_at)
       VALUES (${newId()}, ${tx.json(
         ['task_user:x', 'task_detail:x'].map((channel) => ({
           id: newId(),
           tenant_id: tenantId,
           aggregate_type: 'TASK',
           aggregate_id: e.taskId,
           aggregate_version: version.toString(),
           channel,
           projection: channel === 'task_user:x' ? 'USER_SUMMARY' : 'TASK_DETAIL',
           payload,
         })),
       )}, ${now}, ${now})`,
  ]);
}

async function floorBatches(
  sql: Sql,
  executions: Execution[],
  total: number,
  tenantId: string,
  applicationId: string,
) {
  const groups = partition(executions, BATCH_CLIENTS);
  const cursors = groups.map(() => 0);
  const batches = Math.ceil(total / BATCH);
  const result = await runLoad(batches, BATCH_CLIENTS, async (_i, client) => {
    const group = groups[client]!;
    const chosen = Array.from({ length: BATCH }, () => group[cursors[client]!++ % group.length]!).sort(
      (a, b) => (a.taskId < b.taskId ? -1 : 1),
    );
    await sql.begin(async (tx) => {
      for (const e of chosen) await floorEvent(tx as unknown as Sql, e, tenantId, applicationId);
    });
  });
  return { ...result, count: batches * BATCH, perSecond: (batches * BATCH) / result.seconds };
}

async function floorSingles(
  sql: Sql,
  executions: Execution[],
  total: number,
  clients: number,
  tenantId: string,
  applicationId: string,
) {
  const groups = partition(executions, clients);
  const cursors = groups.map(() => 0);
  const busy = groups.map(() => false);
  return runLoad(total, clients, async () => {
    const client = busy.indexOf(false);
    busy[client] = true;
    const group = groups[client]!;
    try {
      await sql.begin((tx) =>
        floorEvent(tx as unknown as Sql, group[cursors[client]!++ % group.length]!, tenantId, applicationId),
      );
    } finally {
      busy[client] = false;
    }
  });
}

async function floorHeartbeats(sql: Sql, executions: Execution[], total: number) {
  const groups = partition(executions, BATCH_CLIENTS);
  const requests = Math.ceil(total / HEARTBEAT_BATCH);
  const offsets = groups.map(() => 0);
  const result = await runLoad(requests, BATCH_CLIENTS, async (_i, client) => {
    const group = groups[client]!;
    const items = Array.from({ length: HEARTBEAT_BATCH }, () => {
      const e = group[offsets[client]!++ % group.length]!;
      e.beat += 1;
      return e;
    });
    const now = new Date();
    const hashes = items.map((e) => createHash('sha256').update(e.handle).digest('hex'));
    // The lease table's renewal with its attempt lookup, one statement (plain, without the server's
    // checks of a named execution id, the application and the credential's expiry).
    await sql`
      UPDATE execution_lease l SET heartbeat_seq = x.seq, last_heartbeat_at = ${now}
      FROM (SELECT a.id, u.seq FROM unnest(${hashes}::text[], ${items.map((e) => String(e.beat))}::bigint[]) AS u(h, seq)
            JOIN attempt a ON a.handle_hash = decode(u.h, 'hex')) AS x
      WHERE l.attempt_id = x.id AND l.heartbeat_seq < x.seq`;
  });
  return {
    ...result,
    count: requests * HEARTBEAT_BATCH,
    perSecond: (requests * HEARTBEAT_BATCH) / result.seconds,
  };
}

/**
 * The REST batch and the heartbeat batch on a server of their own over `databaseUrl` (`tasks` running
 * steps): what `bench -- growth` measures on an empty and a filled database.
 */
export async function measureEventLoads(
  databaseUrl: string,
  sizes: { tasks: number; events: number; heartbeats: number },
  env: Record<string, string> = {},
): Promise<{ batch: LoadResult; heartbeats: LoadResult }> {
  const server = await startBenchServer(databaseUrl, env);
  const pool = new Pool(server.base, { connections: BATCH_CLIENTS });
  try {
    const executions = await prepare(pool, server.apiKey, 10, Math.ceil(sizes.tasks / 10), 1);
    const batch = await httpBatches(pool, server.apiKey, executions, sizes.events);
    const heartbeats = await httpHeartbeats(pool, server.apiKey, executions, sizes.heartbeats);
    return { batch, heartbeats };
  } finally {
    await pool.close();
    await server.stop();
  }
}

const ratio = (a: LoadResult, b: LoadResult) => (a.perSecond / b.perSecond).toFixed(2);

export async function benchEvents(): Promise<void> {
  const database = await benchDatabase();
  const server = await startBenchServer(database.url);
  const pool = new Pool(server.base, { connections: SINGLE_CLIENTS });
  const sql = connectDatabase({ url: database.url, maxConnections: SINGLE_CLIENTS });
  try {
    console.log(
      `events: ${TASKS} tasks, PostgreSQL ${process.env.DATABASE_URL ? 'from DATABASE_URL' : 'embedded'}`,
    );
    const executions = await prepare(pool, server.apiKey, 10, TASKS / 10, 1);
    const hot = await prepare(pool, server.apiKey, 1, 1, SINGLE_CLIENTS);

    // REST batch and gRPC stream in the order batch, stream, stream, batch (half the events each time),
    // so that neither gains from going first or last on a shared machine or a growing event table.
    const half = BATCH_EVENTS / 2;
    const batchA = await httpBatches(pool, server.apiKey, executions, half);
    const streamA = await grpcStreams(server.grpcAddress, server.apiKey, executions, half);
    const streamB = await grpcStreams(server.grpcAddress, server.apiKey, executions, half);
    const batch = mergeLoads(batchA, await httpBatches(pool, server.apiKey, executions, half));
    const stream = mergeLoads(streamA, streamB);
    console.log(`  batch (${BATCH}/request, ${BATCH_CLIENTS} clients)  HTTP   ${describe(batch)}`);
    console.log(
      `  stream (${BATCH_CLIENTS} streams, ${STREAM_IN_FLIGHT} in flight)  gRPC   ${describe(stream)}`,
    );
    console.log(
      `  ratio stream/batch ${ratio(stream, batch)} (target >= 1; p50/p99: per event on the stream, per request of ${BATCH} in the batch)`,
    );
    const single = await httpSingles(pool, server.apiKey, executions, SINGLE_EVENTS, SINGLE_CLIENTS);
    console.log(`  single (${SINGLE_CLIENTS} clients)             HTTP   ${describe(single)}`);
    const hotHttp = await httpSingles(pool, server.apiKey, hot, HOT_EVENTS, SINGLE_CLIENTS);
    console.log(`  hot task (${SINGLE_CLIENTS} producers, 1 task)  HTTP   ${describe(hotHttp)}`);
    // Both heartbeat runs start with the same uncounted warm-up: a fresh process's first batches pay for
    // compiling the path, a fresh session's for preparing its statement.
    await httpHeartbeats(pool, server.apiKey, executions, HEARTBEAT_WARMUP);
    const beats = await httpHeartbeats(pool, server.apiKey, executions, HEARTBEAT_ITEMS);
    console.log(`  heartbeats (${HEARTBEAT_BATCH}/request)         HTTP   ${describe(beats)}`);
    await server.stop();

    const floorBatch = await floorBatches(
      sql,
      executions,
      BATCH_EVENTS,
      server.tenantId,
      server.applicationId,
    );
    console.log(`  batch floor (same statements, same driver)    ${describe(floorBatch)}`);
    const floorSingle = await floorSingles(
      sql,
      executions,
      SINGLE_EVENTS,
      SINGLE_CLIENTS,
      server.tenantId,
      server.applicationId,
    );
    console.log(`  single floor                                  ${describe(floorSingle)}`);
    const floorHot = await floorSingles(
      sql,
      hot,
      HOT_EVENTS,
      SINGLE_CLIENTS,
      server.tenantId,
      server.applicationId,
    );
    console.log(`  hot task floor                                ${describe(floorHot)}`);
    // On a session like the server's heartbeat pool (asynchronous commit, one generic plan).
    const heartbeatSql = connectDatabase({
      url: database.url,
      maxConnections: BATCH_CLIENTS,
      ...heartbeatSession,
    });
    const floorBeats = await floorHeartbeats(heartbeatSql, executions, HEARTBEAT_WARMUP)
      .then(() => floorHeartbeats(heartbeatSql, executions, HEARTBEAT_ITEMS))
      .finally(() => heartbeatSql.end());
    console.log(`  heartbeat floor                               ${describe(floorBeats)}`);
    console.log(
      `  ratio batch ${ratio(batch, floorBatch)} (target >= 0.6), single ${ratio(single, floorSingle)}, hot ${ratio(hotHttp, floorHot)}, heartbeats ${ratio(beats, floorBeats)}`,
    );
    console.log(
      `  heartbeat items/s ${beats.perSecond.toFixed(0)} (target >= 100,000), floor ${floorBeats.perSecond.toFixed(0)}, ratio ${ratio(beats, floorBeats)}`,
    );
  } finally {
    await pool.close();
    await sql.end();
    await server.stop();
    await database.close();
  }
}
