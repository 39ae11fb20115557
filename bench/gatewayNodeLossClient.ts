/**
 * A process of page-like clients for the gateway-node-loss drill (bench/gatewayNodeLoss.ts): each is
 * what `@tdp/client` makes of a page — the `centrifuge` SDK with a connection token, a `TaskStore`
 * bound to it by `bindTaskStore`, and `TdpUserClient.myTasks()` (`GET /v1/me/tasks` with a user token)
 * as its snapshot, loaded at the first subscription and whenever history cannot recover a gap.
 *
 * It records every live publication (publish → receive latency from the summary's `updatedAt`, and a
 * duplicate when a client gets a task version it already had), every snapshot request (latency and
 * status), and, for the clients whose connection dropped after `kill`, when their person's channel was
 * subscribed again, whether it was recovered from history, and when the store went LIVE again.
 *
 * IPC: `start` → `ready` (every client LIVE); `kill` (the time the node was killed); `report`;
 * `final` (each task's final version) → how many clients miss it; `stop`.
 */
import { Centrifuge } from 'centrifuge';
import { Agent, fetch as undiciFetch } from 'undici';
import WebSocket from 'ws';
import { bindTaskStore, TaskStore, TdpUserClient } from '../packages/client/src/index.ts';

export interface ClientSpec {
  user: string;
  /** Connection token (its person's channel subscribed server-side). */
  token: string;
  /** User token for the snapshot. */
  userToken: string;
  taskId: string;
}

interface Start {
  type: 'start';
  url: string;
  base: string;
  clients: ClientSpec[];
}

interface Tracked {
  spec: ClientSpec;
  store: TaskStore;
  centrifuge: Centrifuge;
  /** The newest task version a publication brought. */
  lastVersion: number;
  /** Every task version a publication brought (a second one is a duplicate). */
  versions: Set<number>;
  lostAt: number | null;
  subscribedAt: number | null;
  liveAt: number | null;
  recovered: boolean | null;
}

export interface Lost {
  lostAt: number;
  subscribedAt: number | null;
  liveAt: number | null;
  recovered: boolean | null;
}

export interface ClientReport {
  /** [arrival wall time, publish → receive ms]. */
  latencies: [number, number][];
  /** [start wall time, ms, HTTP status or 0 for a network error]. */
  snapshots: [number, number, number][];
  lost: Lost[];
  duplicates: number;
  /** Publications older than one the client had, but new to it: they arrived out of order. */
  outOfOrder: number;
  received: number;
  disconnects: Record<string, number>;
}

const tracked: Tracked[] = [];
let latencies: [number, number][] = [];
let snapshots: [number, number, number][] = [];
let duplicates = 0;
let outOfOrder = 0;
let received = 0;
let killAt: number | null = null;
/** Why the SDK stopped (its `disconnected` event: no reconnect follows), by code and reason. */
const disconnects: Record<string, number> = {};

/**
 * The process's pages share this many connections to the server. A browser opens a few per page; a
 * pool without a cap would open one per page during a storm, thousands from one process.
 */
const snapshotConnections = new Agent({ connections: 256 });

/** `fetch` as the browser's, timed: every snapshot the store loads goes through it. */
const timedFetch: typeof fetch = async (input, init) => {
  const startedAt = Date.now();
  try {
    const response = (await undiciFetch(input as string, {
      ...(init as object),
      dispatcher: snapshotConnections,
    })) as unknown as Response;
    snapshots.push([startedAt, Date.now() - startedAt, response.status]);
    return response;
  } catch (error) {
    snapshots.push([startedAt, Date.now() - startedAt, 0]);
    throw error;
  }
};

function open(message: Start, spec: ClientSpec): Promise<void> {
  const store = new TaskStore();
  const centrifuge = new Centrifuge(message.url, {
    websocket: WebSocket,
    token: spec.token,
    // Pages of one person's tasks are small: no need to wait long between attempts.
    maxReconnectDelay: 5_000,
  });
  const reader = new TdpUserClient({ baseUrl: message.base, token: spec.userToken, fetch: timedFetch });
  const client: Tracked = {
    spec,
    store,
    centrifuge,
    lastVersion: 0,
    versions: new Set(),
    lostAt: null,
    subscribedAt: null,
    liveAt: null,
    recovered: null,
  };
  tracked.push(client);
  centrifuge.on('publication', (ctx) => {
    const data = ctx.data as { kind?: string; taskVersion?: string; updatedAt?: string };
    if (data.kind !== 'task.summary' || !data.updatedAt) return;
    received += 1;
    const now = Date.now();
    latencies.push([now, now - Date.parse(data.updatedAt)]);
    const version = Number(data.taskVersion);
    if (client.versions.has(version)) duplicates += 1;
    else if (version < client.lastVersion) outOfOrder += 1;
    client.versions.add(version);
    client.lastVersion = Math.max(client.lastVersion, version);
  });
  centrifuge.on('disconnected', (ctx) => {
    const key = `${ctx.code} ${ctx.reason}`;
    disconnects[key] = (disconnects[key] ?? 0) + 1;
  });
  centrifuge.on('connecting', () => {
    if (killAt !== null && client.lostAt === null) client.lostAt = Date.now();
  });
  centrifuge.on('subscribed', (ctx) => {
    if (!ctx.channel.startsWith('task_user:') || client.lostAt === null || client.subscribedAt !== null)
      return;
    client.subscribedAt = Date.now();
    client.recovered = ctx.wasRecovering && ctx.recovered;
  });
  // Bound after the handlers above: its own 'subscribed' handler may set the store LIVE at once.
  bindTaskStore({ centrifuge, store, loadTasks: async () => (await reader.myTasks()).items });
  const ready = new Promise<void>((resolve) => {
    store.subscribe(() => {
      if (store.connection !== 'LIVE') return;
      if (client.lostAt !== null && client.subscribedAt !== null && client.liveAt === null)
        client.liveAt = Date.now();
      resolve();
    });
  });
  centrifuge.connect();
  return ready;
}

async function start(message: Start) {
  const ready: Promise<void>[] = [];
  for (const spec of message.clients) {
    ready.push(open(message, spec));
    // Thousands of handshakes at once overflow the listen backlog; a small pause between them does not.
    if (ready.length % 50 === 0) await new Promise((resolve) => setTimeout(resolve, 25));
  }
  // A client the SDK gave up on would hold the drill forever: after 3 minutes it goes on without it.
  await Promise.race([Promise.all(ready), new Promise((resolve) => setTimeout(resolve, 180_000))]);
  const notLive = tracked.filter((c) => c.store.connection !== 'LIVE');
  // Where the ones left behind are: the SDK's state and the store's.
  const states: Record<string, number> = {};
  for (const c of notLive) {
    const key = `${c.centrifuge.state}/${c.store.connection}`;
    states[key] = (states[key] ?? 0) + 1;
  }
  process.send?.({ type: 'ready', notLive: notLive.length, disconnects: { ...disconnects, ...states } });
}

type Message =
  | Start
  | { type: 'kill'; at: number }
  | { type: 'report' | 'stop' }
  | { type: 'final'; finals: Record<string, string> };

process.on('disconnect', () => process.exit(0));
process.on('message', (message: Message) => {
  if (message.type === 'start')
    void start(message).catch((error) => process.send?.({ type: 'error', error: String(error) }));
  else if (message.type === 'kill') killAt = message.at;
  else if (message.type === 'report') {
    const report: ClientReport = {
      latencies,
      snapshots,
      lost: tracked
        .filter((c) => c.lostAt !== null)
        .map((c) => ({
          lostAt: c.lostAt!,
          subscribedAt: c.subscribedAt,
          liveAt: c.liveAt,
          recovered: c.recovered,
        })),
      duplicates,
      outOfOrder,
      received,
      disconnects,
    };
    process.send?.({ type: 'report', ...report });
    latencies = [];
    snapshots = [];
  } else if (message.type === 'final') {
    // A client misses the final state when its store shows an older version of its task than the last.
    const missing = tracked.filter(
      (c) => Number(c.store.summary(c.spec.taskId)?.taskVersion ?? 0) < Number(message.finals[c.spec.taskId]),
    ).length;
    const live = tracked.filter((c) => c.store.connection === 'LIVE').length;
    process.send?.({ type: 'final', missing, live });
  } else {
    for (const client of tracked) client.centrifuge.disconnect();
    setTimeout(() => process.exit(0), 200);
  }
});
