/**
 * `npm run chaos -- gateway-node-loss` (`--smoke` for the small size): a realtime node leaves under
 * load (issue 42). Two nodes share one Redis (127.0.0.1:6379, a key prefix of their own) behind
 * round-robin TCP balancers (bench/balancer.ts, two processes) weighted 3:7; a `tdp server` publishes to
 * them through a balancer (CENTRIFUGO_API_URL) and serves the snapshot, `GET /v1/me/tasks`, with its default rate
 * limits. CLIENTS pages, each a person with one task, from a few client processes
 * (bench/gatewayNodeLossClient.ts: the SDK, `TaskStore` and `bindTaskStore` as `@tdp/client` makes a
 * page); the bench commits RATE progress events per second over the tasks, each a numbered version on
 * its person's channel. After STEADY seconds the node with 30% of the clients is SIGKILLed; its clients
 * reconnect through the balancer to the other node and recover from history (or reload the snapshot).
 * Once they are all LIVE again the load goes on AFTER seconds, then every task gets a final event and
 * each client must show its task's final version.
 *
 * Run on TDP's gateway (`tdp gateway --config`, two processes) and on real Centrifugo v6 nodes.
 * Each also with the channels' history dropped from Redis at the kill (`-history-lost`): every client
 * that reconnects then reloads its snapshot — the storm the snapshot endpoint has to hold.
 * NODE_LOSS_CLIENTS, NODE_LOSS_RATE, NODE_LOSS_SYSTEMS (e.g. gateway,centrifugo-history-lost) change it.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { newId } from '../packages/protocol/src/ids.ts';
import { connectDatabase } from '../packages/server/src/main.ts';
import { newTokenSecret } from '../test/centrifugo.ts';
import { startBalancers } from './balancer.ts';
import { type Execution, progressEvent } from './events.ts';
import type { ClientReport, ClientSpec, Lost } from './gatewayNodeLossClient.ts';
import { childProcesses } from './realtimeProcesses.ts';
import { benchDatabase, p99Of, runLoad, sane, sized, smoke, startBenchServer } from './support.ts';

const CLIENTS = sized('NODE_LOSS_CLIENTS', 10_000, 1_000);
const RATE = sized('NODE_LOSS_RATE', 500, 200);
const PROCESSES = sized(null, 4, 2);
/** Load-balancer processes; each client process connects through one of them. */
const BALANCERS = 2;
const STEADY_MS = sized(null, 10_000, 5_000);
const AFTER_MS = sized(null, 10_000, 5_000);
/** Share of the connections the balancer gives the node that is killed. */
const KILLED_WEIGHT = 3;
const KEPT_WEIGHT = 7;
const BATCH = 25;

import { type Kind, REDIS_URL, startNodes } from './gatewayNodeLossNodes.ts';

/** `history-lost`: Redis loses the channels' history as the node dies, so nobody can recover from it. */
type Variant = Kind | `${Kind}-history-lost`;

/** A POST with the application key; a retryable refusal (a request over its deadline) is sent again. */
// biome-ignore lint/suspicious/noExplicitAny: the bench reads a few fields of several answers
async function call(pool: Pool, path: string, apiKey: string, body?: unknown, attempt = 1): Promise<any> {
  const response = await pool.request({
    method: 'POST',
    path,
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.body.text();
  if ((response.statusCode === 503 || response.statusCode === 429) && attempt < 5) {
    await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
    return call(pool, path, apiKey, body, attempt + 1);
  }
  if (response.statusCode >= 300) throw new Error(`POST ${path} answered ${response.statusCode}: ${text}`);
  return JSON.parse(text);
}

/** Per person: a task with a running step (its progress events are the numbered messages), and tokens. */
async function preparePeople(pool: Pool, apiKey: string) {
  const executions: Execution[] = new Array(CLIENTS);
  const specs: ClientSpec[] = new Array(CLIENTS);
  await runLoad(CLIENTS, 16, async (i) => {
    const user = `user-${i}`;
    const workflow = await call(pool, '/v1/workflows', apiKey, {
      clientWorkflowKey: `node-loss-${i}`,
      ownerId: user,
      title: `Node loss ${i}`,
      initialTasks: [
        {
          clientTaskKey: 't',
          title: 'Task',
          knownSteps: [
            {
              stepId: 's',
              operationCode: 'BENCH.WORK',
              expectedProducer: 'bench-worker',
              heartbeatTimeoutSeconds: 3600,
            },
          ],
        },
      ],
    });
    const taskId = workflow.tasks[0].taskId as string;
    const ctx = await call(pool, `/v1/tasks/${taskId}/steps/s:activate`, apiKey);
    const execution = { taskId, executionId: ctx.executionId, handle: ctx.executionHandle, seq: 1, beat: 0 };
    await call(pool, '/v1/task-events', apiKey, {
      executionHandle: execution.handle,
      eventId: newId(),
      eventType: 'STEP_STARTED',
      sourceSeq: 1,
    });
    const connection = await call(pool, '/v1/realtime/connection-token', apiKey, { userId: user });
    const userToken = await call(pool, '/v1/user-tokens', apiKey, { userId: user });
    executions[i] = execution;
    specs[i] = { user, token: connection.token, userToken: userToken.token, taskId };
  });
  return { executions, specs };
}

/** Progress events at RATE per second until `stop()`, in batches of BATCH, at most 16 requests in flight. */
function publish(pool: Pool, apiKey: string, executions: Execution[]) {
  let running = true;
  let next = 0;
  let accepted = 0;
  let failed = 0;
  const done = (async () => {
    const intervalMs = (1000 * BATCH) / RATE;
    const startedAt = performance.now();
    const pending = new Set<Promise<void>>();
    for (let b = 0; running; b += 1) {
      const wait = startedAt + b * intervalMs - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      while (pending.size >= 16) await Promise.race(pending);
      const events = Array.from({ length: BATCH }, () =>
        progressEvent(executions[next++ % executions.length]!),
      );
      const request = call(pool, '/v1/task-events:batch', apiKey, { events })
        .then((answer: { results?: { ok: boolean }[] }) => {
          accepted += answer.results?.filter((r) => r.ok).length ?? 0;
        })
        .catch(() => {
          failed += BATCH;
        })
        .finally(() => pending.delete(request));
      pending.add(request);
    }
    await Promise.all(pending);
  })();
  return {
    stop: async () => {
      running = false;
      await done;
      return { accepted, failed };
    },
  };
}

/** Client process `p` connects through balancer `p % urls.length`. */
function startClients(urls: string[], base: string, specs: ClientSpec[]) {
  const { ask, tell, stop } = childProcesses('bench/gatewayNodeLossClient.ts', PROCESSES);
  return {
    ready: async () => {
      const answers = await ask<{ notLive: number; disconnects: Record<string, number> }>(
        'start',
        'ready',
        (p) => ({
          url: urls[p % urls.length],
          base,
          clients: specs.filter((_, i) => i % PROCESSES === p),
        }),
      );
      const disconnects: Record<string, number> = {};
      for (const a of answers)
        for (const [key, n] of Object.entries(a.disconnects)) disconnects[key] = (disconnects[key] ?? 0) + n;
      return { notLive: answers.reduce((sum, a) => sum + a.notLive, 0), disconnects };
    },
    report: async (): Promise<ClientReport> => {
      const reports = await ask<ClientReport>('report', 'report');
      return {
        latencies: reports.flatMap((r) => r.latencies),
        snapshots: reports.flatMap((r) => r.snapshots),
        lost: reports.flatMap((r) => r.lost),
        duplicates: reports.reduce((sum, r) => sum + r.duplicates, 0),
        outOfOrder: reports.reduce((sum, r) => sum + r.outOfOrder, 0),
        disconnects: Object.assign({}, ...reports.map((r) => r.disconnects)),
        received: reports.reduce((sum, r) => sum + r.received, 0),
      };
    },
    kill: (at: number) => tell({ type: 'kill', at }),
    final: async (finals: Record<string, string>) => {
      const answers = await ask<{ missing: number; live: number }>('final', 'final', () => ({ finals }));
      return {
        missing: answers.reduce((sum, a) => sum + a.missing, 0),
        live: answers.reduce((sum, a) => sum + a.live, 0),
      };
    },
    stop,
  };
}

export interface NodeLossResult {
  system: string;
  clients: number;
  /** Clients that were not LIVE yet when the drill went on (the connect storm left them behind). */
  notLiveAtStart: number;
  onKilledNode: number;
  lostClients: number;
  /** Seconds from the kill until 99% / 100% of the lost clients' channel was subscribed again. */
  subscribed99: number | null;
  subscribed100: number | null;
  /** The same until their store was LIVE again (after a snapshot where one was needed). */
  live100: number | null;
  neverBack: number;
  fromHistory: number;
  fromSnapshot: number;
  missingFinal: number;
  duplicated: number;
  /** Older than a version the client had, first seen then (a late first delivery, no duplicate). */
  outOfOrder: number;
  p99: { before: number | null; during: number | null; after: number | null };
  /** Snapshot requests: when every client first loads its list, and during the storm. */
  snapshotAtConnect: Snapshots;
  snapshotInStorm: Snapshots;
  published: number;
  publishFailed: number;
}

interface Snapshots {
  count: number;
  p99: number | null;
  failed: Record<string, number>;
}

function snapshotsOf(rows: [number, number, number][]): Snapshots {
  const failed: Record<string, number> = {};
  for (const [, , status] of rows) if (status !== 200) failed[status] = (failed[status] ?? 0) + 1;
  return { count: rows.length, p99: p99Of(rows.map((r) => r[1])), failed };
}

/** The first time by which `share` of the lost clients had `time`, in seconds after the kill. */
function timeFor(lost: Lost[], time: (l: Lost) => number | null, share: number, killAt: number) {
  const times = lost
    .map(time)
    .filter((t): t is number => t !== null)
    .sort((a, b) => a - b);
  const needed = Math.ceil(lost.length * share);
  return lost.length > 0 && times.length >= needed ? (times[needed - 1]! - killAt) / 1000 : null;
}

export async function nodeLoss(variant: Variant): Promise<NodeLossResult> {
  const kind = variant.replace('-history-lost', '') as Kind;
  const historyLost = variant !== kind;
  const tokenSecret = newTokenSecret();
  const apiKey = `node-loss-${randomBytes(8).toString('hex')}`;
  const prefix = `tdp-node-loss-${randomBytes(6).toString('hex')}`;
  const nodes = await startNodes(kind, tokenSecret, apiKey, prefix);
  const balancers = await startBalancers(BALANCERS, [
    { port: nodes[0]!.port, weight: KILLED_WEIGHT },
    { port: nodes[1]!.port, weight: KEPT_WEIGHT },
  ]);
  const [port] = balancers.ports;
  const database = await benchDatabase();
  // The snapshot endpoint as deployed: the default rate limits (the bench's servers lift them).
  const server = await startBenchServer(database.url, {
    CENTRIFUGO_API_URL: `http://127.0.0.1:${port}/api`,
    CENTRIFUGO_API_KEY: apiKey,
    TDP_REALTIME_TOKEN_SECRET: tokenSecret,
    TDP_REALTIME_WS_URL: `ws://127.0.0.1:${port}/connection/websocket`,
    TDP_RATE_LIMIT_APPLICATION_PER_SECOND: '10000',
    TDP_RATE_LIMIT_APPLICATION_BURST: '20000',
    // Every drill client shares 127.0.0.1; real pages come from their own addresses, so the per-address
    // cap (1,024 open connections) would measure the drill, not the endpoint.
    TDP_MAX_CONNECTIONS_PER_IP: String(CLIENTS * 2),
  });
  const pool = new Pool(server.base, { connections: 32 });
  let clients: ReturnType<typeof startClients> | null = null;
  try {
    const preparing = performance.now();
    const { executions, specs } = await preparePeople(pool, server.apiKey);
    console.log(
      `  ${kind}: ${CLIENTS} people with a task each in ${((performance.now() - preparing) / 1000).toFixed(0)} s; connecting`,
    );
    clients = startClients(
      balancers.ports.map((p) => `ws://127.0.0.1:${p}/connection/websocket`),
      server.base,
      specs,
    );
    const connecting = performance.now();
    const connected = await clients.ready();
    // Clients the SDK gave up on while connecting (and why) are counted, not waited for.
    if (connected.notLive > 0)
      console.log(
        `  ${kind}: ${connected.notLive} clients not LIVE after 3 minutes; SDK disconnects and states ${JSON.stringify(connected.disconnects)}`,
      );
    const atConnect = await clients.report();
    const routed = await balancers.routed();
    const onKilledNode = routed[0]!;
    console.log(
      `  ${kind}: ${CLIENTS - connected.notLive} LIVE in ${((performance.now() - connecting) / 1000).toFixed(1)} s (${routed.join(' / ')} connections per node); publishing ${RATE}/s`,
    );
    const publisher = publish(pool, server.apiKey, executions);
    await new Promise((resolve) => setTimeout(resolve, STEADY_MS));
    const latencies: [number, number][] = [];
    const snapshots: [number, number, number][] = [];
    const collect = async () => {
      const report = await clients!.report();
      latencies.push(...report.latencies);
      snapshots.push(...report.snapshots);
      return report;
    };
    await describeDelivery(kind, database.url, (await collect()).received);
    const killAt = Date.now();
    clients.kill(killAt);
    nodes[0]!.kill();
    // The worst case for the snapshot endpoint: every reconnecting client reloads its snapshot (what a
    // Redis restarted without its data, or a Sentinel failover to a lagging replica, causes).
    if (historyLost) await dropKeys(prefix);
    // Until every client that lost its node is LIVE again (and no more are dropping), at most 120 s.
    let report = await collect();
    let lastCount = -1;
    let backAt = killAt;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      report = await collect();
      const all = report.lost.length > 0 && report.lost.every((l) => l.liveAt !== null);
      if (all && report.lost.length === lastCount && Date.now() - killAt > 3_000) {
        backAt = Math.max(...report.lost.map((l) => l.liveAt!));
        break;
      }
      lastCount = report.lost.length;
      if (Date.now() - killAt > 120_000) {
        backAt = Date.now();
        break;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, AFTER_MS));
    const { accepted, failed } = await publisher.stop();
    // The final messages: one more event for every task; each client must end at its task's version.
    await runLoad(Math.ceil(executions.length / 100), 8, async (b) => {
      const events = executions.slice(b * 100, (b + 1) * 100).map(progressEvent);
      await call(pool, '/v1/task-events:batch', server.apiKey, { events });
    });
    const sql = connectDatabase({ url: database.url, maxConnections: 1 });
    const rows = await sql<{ id: string; version: string }[]>`SELECT id::text, version::text FROM task`;
    await sql.end();
    const finals = Object.fromEntries(rows.map((r) => [r.id, r.version]));
    let final = await clients.final(finals);
    for (let waited = 0; final.missing > 0 && waited < 30_000; waited += 500) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      final = await clients.final(finals);
    }
    report = await collect();
    await describeDelivery(kind, database.url, report.received);
    const lost = report.lost;
    const inPhase = (from: number, to: number) =>
      p99Of(latencies.filter(([at]) => at >= from && at < to).map(([, ms]) => ms));
    return {
      system: `${kind === 'gateway' ? 'TDP gateway' : 'Centrifugo'}${historyLost ? ', history lost' : ''}`,
      clients: CLIENTS,
      notLiveAtStart: connected.notLive,
      onKilledNode,
      lostClients: lost.length,
      subscribed99: timeFor(lost, (l) => l.subscribedAt, 0.99, killAt),
      subscribed100: timeFor(lost, (l) => l.subscribedAt, 1, killAt),
      live100: timeFor(lost, (l) => l.liveAt, 1, killAt),
      neverBack: lost.filter((l) => l.liveAt === null).length,
      fromHistory: lost.filter((l) => l.recovered === true).length,
      fromSnapshot: lost.filter((l) => l.recovered === false).length,
      missingFinal: final.missing,
      duplicated: report.duplicates,
      outOfOrder: report.outOfOrder,
      p99: {
        before: inPhase(0, killAt),
        during: inPhase(killAt, backAt + 1),
        after: inPhase(backAt + 1, Number.POSITIVE_INFINITY),
      },
      snapshotAtConnect: snapshotsOf(atConnect.snapshots),
      snapshotInStorm: snapshotsOf(snapshots.filter(([at]) => at >= killAt && at <= backAt)),
      published: accepted,
      publishFailed: failed,
    };
  } finally {
    await clients?.stop();
    await pool.close();
    await server.stop();
    await database.close();
    await balancers.close();
    await Promise.all(nodes.map((node) => node.stop()));
    await dropKeys(prefix);
  }
}

/** What reached the clients so far and where the relay's rows stand: a drill that stalls says where. */
async function describeDelivery(kind: Kind, url: string, received: number) {
  const sql = connectDatabase({ url, maxConnections: 1 });
  try {
    // A row sent more than once (claimed again after a failed round) may reach clients twice.
    const rows = await sql<{ status: string; count: string; again: string; error: string | null }[]>`
      SELECT status, count(*)::text AS count, max(last_error) AS error,
             coalesce(sum(jsonb_array_length(messages)) FILTER (WHERE attempts > 1), 0)::text AS again
      FROM realtime_outbox GROUP BY status`;
    const states = rows.map(
      (r) =>
        `${r.status} ${r.count}${r.again !== '0' ? ` (${r.again} messages claimed again)` : ''}${r.error ? ` (${r.error.slice(0, 120)})` : ''}`,
    );
    console.log(`  ${kind}: ${received} publications received so far; realtime outbox: ${states.join(', ')}`);
  } finally {
    await sql.end();
  }
}

async function dropKeys(prefix: string) {
  const redis = new Redis(REDIS_URL);
  const keys = await redis.keys(`${prefix}*`);
  // Hundreds of thousands with the idempotency keys: in parts, not as one call's arguments.
  for (let start = 0; start < keys.length; start += 1_000)
    await redis.del(...keys.slice(start, start + 1_000));
  redis.disconnect();
}

const s = (seconds: number | null) => (seconds === null ? '—' : `${seconds.toFixed(1)} s`);
const ms = (value: number | null) => (value === null ? '—' : `${value.toFixed(0)}`);
const snap = (x: Snapshots) =>
  `${x.count}, p99 ${ms(x.p99)} ms${Object.keys(x.failed).length ? `, failed ${JSON.stringify(x.failed)}` : ', none failed'}`;

export function nodeLossTable(results: NodeLossResult[]): string {
  const header =
    '| system | clients (not LIVE at start) / connections routed to the killed node / dropped | back: 99% / 100% subscribed, 100% LIVE | from history / snapshot / never back | lost (final state missing) | duplicated / out of order | p99 publish→receive before / during / after (ms) | snapshots at connect | snapshots in the storm |';
  const rows = results.map(
    (r) =>
      `| ${r.system} | ${r.clients} (${r.notLiveAtStart}) / ${r.onKilledNode} / ${r.lostClients} | ${s(r.subscribed99)} / ${s(r.subscribed100)}, ${s(r.live100)} | ${r.fromHistory} / ${r.fromSnapshot} / ${r.neverBack} | ${r.missingFinal} | ${r.duplicated} / ${r.outOfOrder} | ${ms(r.p99.before)} / ${ms(r.p99.during)} / ${ms(r.p99.after)} | ${snap(r.snapshotAtConnect)} | ${snap(r.snapshotInStorm)} |`,
  );
  return [header, `|${' --- |'.repeat(9)}`, ...rows].join('\n');
}

/** Both systems (NODE_LOSS_SYSTEMS picks), one table; non-zero when a client lost its final state. */
export async function runGatewayNodeLoss(): Promise<boolean> {
  const systems = (
    process.env.NODE_LOSS_SYSTEMS ?? 'gateway,gateway-history-lost,centrifugo,centrifugo-history-lost'
  ).split(',') as Variant[];
  console.log(
    `gateway-node-loss${smoke ? ' (SMOKE)' : ''}: ${CLIENTS} clients from ${PROCESSES} processes on 2 nodes (Redis, ${KILLED_WEIGHT}:${KEPT_WEIGHT} behind a balancer), ${RATE} changes/s; SIGKILL of the ${KILLED_WEIGHT * 10}% node after ${STEADY_MS / 1000} s`,
  );
  const results: NodeLossResult[] = [];
  for (const kind of systems) {
    const result = await nodeLoss(kind);
    console.log(
      `  ${result.system}: published ${result.published} (${result.publishFailed} refused and not retried)`,
    );
    results.push(result);
  }
  console.log(`\n${nodeLossTable(results)}\n`);
  for (const r of results) sane(r.lostClients > 0, `${r.system}: no client lost its node`);
  return results.every((r) => r.missingFinal === 0 && r.neverBack === 0);
}
