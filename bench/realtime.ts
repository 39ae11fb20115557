/**
 * `npm run bench -- realtime`: live status end to end, through the embedded gateway and through a real
 * Centrifugo, against socket.io doing the same on this machine.
 *
 * - Live: 1,000 users, each with a task, each connected over WebSocket from client processes (the
 *   `centrifuge` SDK, the user's channel subscribed by the connection token). Task state changes
 *   (progress events) are committed through `POST /v1/task-events:batch` at 1,000 per second for 30 s;
 *   each client measures change → visible (from the summary's `updatedAt`, the fact's time, taken as its
 *   transaction starts, to its arrival), and commit → visible (from the commit time PostgreSQL recorded
 *   for that change's transaction, `track_commit_timestamp`, to its arrival). Run three times:
 *   the embedded gateway with every client reading; then again in four alternate parts, 10% of the
 *   clients not reading in the second and fourth, the other 90% measured apart in the two kinds; then a
 *   real Centrifugo v6
 *   (started here with the config `tdp centrifugo-config` prints; the server publishes through its HTTP
 *   API and the clients connect to it with TDP's tokens). The peer: a socket.io server emitting the same
 *   number of messages per second to one room per user, measured emit → visible.
 * - Idle: 10,000 connections held open on the gateway alone (`tdp gateway`'s code, memory engine, each
 *   connection with its user channel), on Centrifugo (the same tokens and channel) and on socket.io (each
 *   socket in its room); memory per connection from the server process's RSS (and for Node the heap
 *   after a full GC), before and after. Centrifugo's RSS is read from /proc: Go returns freed memory
 *   lazily, so it is an upper bound.
 *
 * BENCH_RT_USERS, BENCH_RT_RATE, BENCH_RT_SECONDS, BENCH_RT_BATCH (events per request, default 25)
 * and BENCH_RT_IDLE change the sizes.
 */
import { Pool } from 'undici';
import { connectDatabase } from '../packages/server/src/main.ts';
import { newTokenSecret, requireCentrifugo, startCentrifugo } from '../test/centrifugo.ts';
import { type Execution, prepare, progressEvent } from './events.ts';
import { type Idle, idleCentrifugoMemory, idleConnections, idleMemory } from './realtimeIdle.ts';
import {
  BATCH,
  CLIENT_PROCESSES,
  IDLE,
  openClients,
  RATE,
  SECONDS,
  startPeer,
  USERS,
  waitFor,
} from './realtimeProcesses.ts';
import {
  benchDatabase,
  cpuSeconds,
  percentile,
  postgresCpuSeconds,
  sane,
  smoke,
  startBenchServer,
} from './support.ts';

interface Live {
  committedPerSecond: number;
  deliveredPerSecond: number;
  p50: number;
  p99: number;
  /** From each change's commit (TDP's rows only, where PostgreSQL records commit times). */
  fromCommit?: { p50: number; p99: number };
}

/**
 * With `slowShare`, that share of the clients stops reading its sockets for every other of SEGMENTS
 * parts of the run, and the others' latencies are measured apart in the two kinds of parts: the
 * comparison is within one server, one database and one stretch of time, so that a stall of the
 * machine (one in a run's 360 batches sets its p99) does not pass for the slow consumers' doing. With
 * `centrifugo`, a real Centrifugo serves the clients: the server publishes to its HTTP API and signs its
 * tokens with the secret Centrifugo checks them with.
 */
async function liveTdp(
  options: { slowShare?: number; centrifugo?: { binary: string } } = {},
): Promise<{ reading: Live; slowNotReading: Live | null }> {
  const slowShare = options.slowShare ?? 0;
  const tokenSecret = newTokenSecret();
  const centrifugo = options.centrifugo
    ? await startCentrifugo({ binary: options.centrifugo.binary, tokenSecret })
    : null;
  const database = await benchDatabase(undefined, { track_commit_timestamp: 'on' });
  const server = await startBenchServer(
    database.url,
    centrifugo
      ? {
          CENTRIFUGO_API_URL: centrifugo.apiUrl,
          CENTRIFUGO_API_KEY: centrifugo.apiKey,
          TDP_REALTIME_TOKEN_SECRET: tokenSecret,
          TDP_REALTIME_WS_URL: centrifugo.wsUrl,
        }
      : {},
  );
  const pool = new Pool(server.base, { connections: 32 });
  try {
    const executions = await prepare(pool, server.apiKey, USERS, 1, 1);
    const connections = [];
    let wsUrl = '';
    for (let u = 0; u < USERS; u += 1) {
      const response = await pool.request({
        method: 'POST',
        path: '/v1/realtime/connection-token',
        headers: { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ userId: `user-${u}` }),
      });
      const issued = (await response.body.json()) as { token: string; url: string };
      wsUrl = issued.url;
      const slow = u < Math.round(USERS * slowShare);
      connections.push({ user: `user-${u}`, token: issued.token, slow });
    }
    const clients = await openClients('tdp', wsUrl, connections);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await clients.report();
    const databaseName = new URL(database.url).pathname.slice(1);
    const cpu = async () => ({
      server: await cpuSeconds(server.pid),
      postgres: await postgresCpuSeconds(databaseName),
      centrifugo: centrifugo ? await cpuSeconds(centrifugo.pid) : 0,
    });
    const measuredSince = new Date();
    const cpuBefore = await cpu();
    const histogramsBefore = await serverHistograms(server.base);
    // Parts of the run: all reading, or (with a slow share) the slow ones not reading in every other.
    const parts = slowShare > 0 ? SEGMENTS : 1;
    const measured = { reading: newPhase(), slowNotReading: newPhase() };
    for (let part = 0; part < parts; part += 1) {
      const slowPaused = part % 2 === 1;
      if (slowPaused) await clients.pauseSlow();
      else if (part > 0) await clients.resumeSlow();
      const offered = await offerEvents(pool, server.apiKey, executions, SECONDS / parts);
      await new Promise((resolve) => setTimeout(resolve, parts > 1 ? 1_000 : 3_000));
      const phase = slowPaused ? measured.slowNotReading : measured.reading;
      const { latencies, arrivals, received } = await clients.report();
      phase.latencies.push(...latencies);
      phase.arrivals.push(...arrivals);
      phase.received += received;
      phase.committed += offered.count;
      phase.seconds += offered.seconds;
    }
    const committed = { count: measured.reading.committed + measured.slowNotReading.committed };
    const cpuAfter = await cpu();
    const histogramsAfter = await serverHistograms(server.base);
    const during = (series: string) =>
      quantilesBetween(histogramsBefore.get(series) ?? [], histogramsAfter.get(series) ?? []);
    const relay = during('tdp_realtime_commit_to_publish_seconds');
    const handoff = during('tdp_realtime_handoff_seconds');
    const phases = (['queue', 'work', 'commit'] as const).map((phase) => {
      const q = during(`tdp_fact_transaction_seconds{phase="${phase}"}`);
      return `${phase} <= ${q.p50} / ${q.p99}`;
    });
    await clients.stop();
    const commits = await commitTimes(database.url, measuredSince);
    sane(committed.count > 0, 'no change committed');
    for (const phase of parts > 1 ? [measured.reading, measured.slowNotReading] : [measured.reading])
      sane(
        phase.received > 0 && phase.latencies.length > 0,
        `${phase.received} messages delivered of ${phase.committed} changes`,
      );
    // Where the time goes, steadier than latency on a shared machine: CPU of each process per change.
    const perChange = (key: keyof typeof cpuAfter) =>
      `${(((cpuAfter[key] - cpuBefore[key]) * 1000) / committed.count).toFixed(2)} ms`;
    console.log(
      `  (the server's own histograms, p50 / p99 in ms: its transactions ${phases.join(', ')}; change→publish <= ${relay.p50} / ${relay.p99}, commit→publish <= ${handoff.p50} / ${handoff.p99}; CPU per change: server ${perChange('server')}, PostgreSQL ${perChange('postgres')}${centrifugo ? `, Centrifugo ${perChange('centrifugo')}` : ''})`,
    );
    return {
      reading: liveOf(measured.reading, commits),
      slowNotReading: parts > 1 ? liveOf(measured.slowNotReading, commits) : null,
    };
  } finally {
    await pool.close();
    await server.stop();
    await database.close();
    await centrifugo?.stop();
  }
}

/** Alternating parts of a run with slow consumers: all reading, the slow share not reading, … */
const SEGMENTS = 4;

interface Phase {
  latencies: number[];
  arrivals: [string, number][];
  received: number;
  committed: number;
  seconds: number;
}

const newPhase = (): Phase => ({ latencies: [], arrivals: [], received: 0, committed: 0, seconds: 0 });

function liveOf(phase: Phase, commits: Map<string, number> | null): Live {
  const latencies = phase.latencies.sort((a, b) => a - b);
  let fromCommit: Live['fromCommit'];
  if (commits) {
    const sinceCommit = phase.arrivals
      .filter(([change]) => commits.has(change))
      .map(([change, at]) => at - commits.get(change)!)
      .sort((a, b) => a - b);
    // Every change delivered was committed in the measured window: a miss means the join is wrong.
    sane(
      sinceCommit.length === phase.arrivals.length,
      `${phase.arrivals.length - sinceCommit.length} of ${phase.arrivals.length} arrivals without a commit time`,
    );
    fromCommit = { p50: percentile(sinceCommit, 50), p99: percentile(sinceCommit, 99) };
  }
  return {
    ...(fromCommit ? { fromCommit } : {}),
    committedPerSecond: phase.committed / phase.seconds,
    deliveredPerSecond: phase.received / phase.seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

/**
 * When PostgreSQL committed each change since `since`, by `taskId:taskVersion` (ms since the epoch, with
 * a fraction): the commit time it records for the transaction that wrote the change's task event. Null
 * on a server that does not record commit times (a DATABASE_URL one without `track_commit_timestamp`).
 */
async function commitTimes(url: string, since: Date): Promise<Map<string, number> | null> {
  const sql = connectDatabase({ url, maxConnections: 1 });
  try {
    const [setting] = await sql<{ on: string }[]>`SELECT current_setting('track_commit_timestamp') AS on`;
    if (setting?.on !== 'on') return null;
    const rows = await sql<{ change: string; ms: string }[]>`
      SELECT task_id::text || ':' || task_version AS change,
             extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000 AS ms
      FROM task_event
      WHERE committed_at >= ${since}`;
    return new Map(rows.map((row) => [row.change, Number(row.ms)]));
  } finally {
    await sql.end();
  }
}

type Buckets = { le: number; count: number }[];

/**
 * The server's histograms from /metrics, by series (name and labels but `le`): each bucket's upper bound
 * in ms and its cumulative count.
 */
async function serverHistograms(base: string): Promise<Map<string, Buckets>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const histograms = new Map<string, Buckets>();
  for (const m of text.matchAll(/^(\w+)_bucket\{le="([^"]+)"(?:,(.*))?\} (\d+)$/gm)) {
    const series = m[3] ? `${m[1]}{${m[3]}}` : m[1]!;
    const buckets = histograms.get(series) ?? [];
    buckets.push({
      le: m[2] === '+Inf' ? Number.POSITIVE_INFINITY : Number(m[2]) * 1000,
      count: Number(m[4]),
    });
    histograms.set(series, buckets);
  }
  return histograms;
}

/**
 * Upper bounds of the buckets holding the p50 and p99 of what a histogram observed between two reads:
 * the measured run's own, without the set-up's.
 */
function quantilesBetween(before: Buckets, after: Buckets): { p50: number; p99: number } {
  const buckets = after.map((b, i) => ({ le: b.le, count: b.count - (before[i]?.count ?? 0) }));
  const total = buckets.at(-1)?.count ?? 0;
  const bound = (q: number) => buckets.find((b) => b.count >= q * total)?.le ?? Number.NaN;
  return { p50: bound(0.5), p99: bound(0.99) };
}

/**
 * Progress events at RATE per second for `seconds`, in requests of BATCH events at even intervals, each
 * over distinct tasks (so a task's events stay in order); at most 16 requests in flight. Small batches
 * keep each transaction short (its start is the time a client measures from).
 */
async function offerEvents(pool: Pool, apiKey: string, executions: Execution[], seconds: number) {
  const perBatch = BATCH;
  const batches = Math.round((RATE * seconds) / perBatch);
  const intervalMs = (1000 * perBatch) / RATE;
  let next = 0;
  let accepted = 0;
  let inFlight = 0;
  const startedAt = performance.now();
  const pending: Promise<void>[] = [];
  for (let b = 0; b < batches; b += 1) {
    const due = startedAt + b * intervalMs;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    while (inFlight >= 16) await new Promise((resolve) => setTimeout(resolve, 2));
    const events = Array.from({ length: perBatch }, () =>
      progressEvent(executions[next++ % executions.length]!),
    );
    inFlight += 1;
    pending.push(
      pool
        .request({
          method: 'POST',
          path: '/v1/task-events:batch',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ events }),
        })
        .then(async (response) => {
          const answer = (await response.body.json()) as { results?: { ok: boolean }[] };
          accepted += answer.results?.filter((r) => r.ok).length ?? 0;
        })
        .finally(() => {
          inFlight -= 1;
        }),
    );
  }
  await Promise.all(pending);
  return { count: accepted, seconds: (performance.now() - startedAt) / 1000 };
}

async function liveSocketIo(): Promise<Live> {
  const peer = await startPeer('socketio');
  try {
    const users = Array.from({ length: USERS }, (_, u) => `user-${u}`);
    const clients = await openClients(
      'socketio',
      `http://127.0.0.1:${peer.port}`,
      users.map((user) => ({ user })),
    );
    await clients.report();
    const startedAt = performance.now();
    const loaded = waitFor<{ sent: number }>(peer.child, 'loaded');
    peer.child.send({ type: 'load', users, perSecond: RATE, seconds: SECONDS });
    const { sent } = await loaded;
    const seconds = (performance.now() - startedAt) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const { latencies, received } = await clients.report();
    await clients.stop();
    return {
      committedPerSecond: sent / seconds,
      deliveredPerSecond: received / seconds,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
    };
  } finally {
    peer.stop();
  }
}

/**
 * The floor of the Centrifugo path: the bench publishes straight to Centrifugo's HTTP API, at the same
 * rate and in batches of the same size, messages of a summary's size to the same users' channels, and
 * the same clients measure publish → visible. What TDP adds on top is the rest of the TDP row.
 */
async function liveCentrifugoAlone(binary: string): Promise<Live> {
  const tokenSecret = newTokenSecret();
  const centrifugo = await startCentrifugo({ binary, tokenSecret });
  try {
    const users = (await idleConnections(tokenSecret)).slice(0, USERS);
    const clients = await openClients('tdp', centrifugo.wsUrl, users);
    await clients.report();
    const batches = Math.round((RATE * SECONDS) / BATCH);
    const intervalMs = (1000 * BATCH) / RATE;
    const startedAt = performance.now();
    const pending: Promise<void>[] = [];
    let sent = 0;
    for (let b = 0; b < batches; b += 1) {
      const wait = startedAt + b * intervalMs - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const commands = Array.from({ length: BATCH }, () => ({
        publish: {
          channel: `task_user:t/user-${sent++ % USERS}`,
          data: { updatedAt: new Date().toISOString(), padding: 'x'.repeat(500) },
        },
      }));
      pending.push(
        fetch(`${centrifugo.apiUrl}/batch`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': centrifugo.apiKey },
          body: JSON.stringify({ commands }),
        }).then(async (response) => {
          sane(response.ok, `Centrifugo's API answered ${response.status}`);
          await response.body?.cancel();
        }),
      );
    }
    await Promise.all(pending);
    const seconds = (performance.now() - startedAt) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const { latencies, received } = await clients.report();
    await clients.stop();
    return {
      committedPerSecond: sent / seconds,
      deliveredPerSecond: received / seconds,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
    };
  } finally {
    await centrifugo.stop();
  }
}

/**
 * The Centrifugo binary. Without one a smoke run outside CI skips the Centrifugo rows (saying so); under
 * CI, or in a full run, where those rows are the point, it fails.
 */
function centrifugoForBench(): string | null {
  const binary = requireCentrifugo();
  if (!binary && !smoke)
    throw new Error(
      'the realtime bench needs Centrifugo: run scripts/services.sh (it builds ~/go/bin/centrifugo)',
    );
  return binary;
}

const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
const ratio = (a: number, b: number) => (a / b).toFixed(2);

export async function benchRealtime(): Promise<void> {
  const binary = centrifugoForBench();
  console.log(
    `realtime: ${USERS} users on WebSocket from ${CLIENT_PROCESSES} client processes, ${RATE} changes/s (${BATCH} per request) for ${SECONDS} s; ${IDLE} idle connections`,
  );
  const line = (name: string, f: Live) =>
    console.log(
      `  ${name.padEnd(14)} committed ${f.committedPerSecond.toFixed(0).padStart(5)}/s  delivered ${f.deliveredPerSecond.toFixed(0).padStart(5)}/s  visible p50 ${f.p50.toFixed(0)} ms  p99 ${f.p99.toFixed(0)} ms${f.fromCommit ? `  (from the commit p50 ${f.fromCommit.p50.toFixed(1)} ms  p99 ${f.fromCommit.p99.toFixed(1)} ms)` : ''}`,
    );
  /** The p99 a target is judged on: from the commit where PostgreSQL recorded it. */
  const p99Of = (f: Live) => f.fromCommit?.p99 ?? f.p99;
  const tdp = (await liveTdp()).reading;
  line('TDP', tdp);
  // Clients that stop reading must not slow the others down (docs/realtime.md, "Slow clients").
  const slowRun = await liveTdp({ slowShare: 0.1 });
  const withSlow = slowRun.slowNotReading!;
  line('  all reading', slowRun.reading);
  line('  10% not', withSlow);
  // Judged like the latency targets, from the commit where it is recorded; from the change's time too.
  const basis = withSlow.fromCommit ? 'commit → visible' : 'change → visible';
  console.log(
    `  slow consumers: the other 90%'s ${basis} p99 ${p99Of(withSlow).toFixed(1)} ms while 10% do not read vs ${p99Of(slowRun.reading).toFixed(1)} ms while all read, in alternate parts of one run → ${ratio(p99Of(withSlow), Math.max(p99Of(slowRun.reading), 1))} (target <= 1.2); change → visible ${withSlow.p99.toFixed(0)} vs ${slowRun.reading.p99.toFixed(0)} ms → ${ratio(withSlow.p99, Math.max(slowRun.reading.p99, 1))}`,
  );
  const viaCentrifugo = binary ? (await liveTdp({ centrifugo: { binary } })).reading : null;
  if (viaCentrifugo) line('TDP Centrifugo', viaCentrifugo);
  else console.log('  TDP Centrifugo skipped: no Centrifugo binary (scripts/services.sh builds it)');
  // No peers or floors in a smoke run: it checks that TDP's paths work, it has no ratio to give.
  const centrifugoAlone = binary && !smoke ? await liveCentrifugoAlone(binary) : null;
  if (centrifugoAlone) line('Centrifugo', centrifugoAlone);
  const peer = smoke ? null : await liveSocketIo();
  if (peer) line('socket.io', peer);

  const tdpIdle = await idleMemory('gateway');
  const centrifugoIdle = binary ? await idleCentrifugoMemory(binary) : null;
  const peerIdle = peer ? await idleMemory('socketio') : null;
  const idle = [
    `TDP gateway RSS ${kb(tdpIdle.rssPerConnection)} heap ${kb(tdpIdle.heapPerConnection!)}`,
    ...(centrifugoIdle ? [`Centrifugo RSS ${kb(centrifugoIdle.rssPerConnection)}`] : []),
    ...(peerIdle
      ? [`socket.io RSS ${kb(peerIdle.rssPerConnection)} heap ${kb(peerIdle.heapPerConnection!)}`]
      : []),
  ];
  console.log(`  idle memory per connection (${IDLE}): ${idle.join('; ')}`);
  // The heap after a full GC, not the RSS: with a smoke run's 200 connections the RSS moves by less than
  // its own noise (one CI run measured -2.1 KiB a connection while the heap grew 9.5 KiB).
  sane(tdpIdle.heapPerConnection! > 0, 'no memory held by idle gateway connections');

  console.log('');
  const delivered = (f: Live) =>
    peer
      ? `; delivered ${f.deliveredPerSecond.toFixed(0)}/s vs socket.io ${peer.deliveredPerSecond.toFixed(0)}/s → ${ratio(f.deliveredPerSecond, peer.deliveredPerSecond)} (target >= 1)`
      : '';
  const memory = (own: Idle, target: string) =>
    peerIdle
      ? `; memory per idle connection ${kb(own.rssPerConnection)} vs socket.io ${kb(peerIdle.rssPerConnection)} → ${ratio(own.rssPerConnection, peerIdle.rssPerConnection)}${target}`
      : '';
  // The targets are commit → visible; the change's own time adds its transaction (the write's latency).
  const p99s = (f: Live, target: number) =>
    f.fromCommit
      ? `commit → visible p99 ${f.fromCommit.p99.toFixed(1)} ms (target <= ${target} ms), change → visible p99 ${f.p99.toFixed(0)} ms`
      : `change → visible p99 ${f.p99.toFixed(0)} ms (target <= ${target} ms from the commit, not recorded by this PostgreSQL)`;
  console.log(`  embedded gateway: ${p99s(tdp, 25)}${delivered(tdp)}${memory(tdpIdle, ' (target <= 0.5)')}`);
  // Like with like: commit → visible where both have it; Centrifugo alone measures publish → visible.
  if (viaCentrifugo)
    console.log(
      `  through Centrifugo: ${p99s(viaCentrifugo, 50)}; p99 ${p99Of(viaCentrifugo).toFixed(1)} vs ${p99Of(tdp).toFixed(1)} ms embedded → ${ratio(p99Of(viaCentrifugo), Math.max(p99Of(tdp), 1))}${centrifugoAlone ? `; vs Centrifugo alone (publish → visible) ${centrifugoAlone.p99.toFixed(0)} ms → ${ratio(p99Of(viaCentrifugo), Math.max(centrifugoAlone.p99, 1))}` : ''}${delivered(viaCentrifugo)}${centrifugoIdle ? memory(centrifugoIdle, '') : ''}`,
    );
}
