/**
 * A process of live clients for the redis-failover drill (bench/redisFailover.ts): each a `centrifuge`
 * SDK client on one gateway node, following one channel as a page does — a snapshot (the drill's
 * `GET /current`, what the application would serve) when a subscription is not recovered from history,
 * then each numbered message in turn.
 *
 * Recorded per client: publish → receive latency (the message carries its publish time), messages
 * delivered twice (a number at or below the last one delivered), numbers skipped without a snapshot
 * (a gap nobody noticed), after the kill how each subscription came back (recovered from history or
 * a snapshot) and when the first message published after the kill arrived.
 *
 * IPC: `start` → `ready` (all subscribed); `kill` (its time); `report`; `final` (each channel's last
 * number) → how many clients miss it and how many are not subscribed; `stop`.
 */
import { Centrifuge, type Subscription } from 'centrifuge';
import WebSocket from 'ws';

export interface FollowerSpec {
  url: string;
  channel: string;
  token: string;
  channelToken: string;
}

interface Follower {
  spec: FollowerSpec;
  centrifuge: Centrifuge;
  subscription: Subscription;
  value: number;
  lastDelivered: number;
  subscribedOnce: boolean;
  /** A snapshot is on its way: numbers that skip ahead meanwhile are not gaps. */
  loading: boolean;
  /** After the kill: how its subscription came back, and the first post-kill message's arrival. */
  recovered: number;
  reloaded: number;
  firstAfterKill: number | null;
}

export interface FailoverClientReport {
  /** [arrival wall time, publish → receive ms]. */
  latencies: [number, number][];
  duplicates: number;
  silentGaps: number;
  recovered: number;
  reloaded: number;
  /** Arrival of the first message published after the kill, per client (null: none yet). */
  firstAfterKill: (number | null)[];
  /** The node (its URL) of each of those clients. */
  nodes: string[];
  snapshotFailures: number;
}

const followers: Follower[] = [];
let latencies: [number, number][] = [];
let duplicates = 0;
let silentGaps = 0;
let snapshotFailures = 0;
let killAt: number | null = null;
let snapshotUrl = '';

async function snapshot(channel: string): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    try {
      const response = await fetch(`${snapshotUrl}?channel=${encodeURIComponent(channel)}`);
      return Number(await response.text());
    } catch (error) {
      snapshotFailures += 1;
      if (attempt > 20) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

function open(spec: FollowerSpec): Promise<void> {
  const centrifuge = new Centrifuge(spec.url, {
    websocket: WebSocket,
    token: spec.token,
    minReconnectDelay: 100,
    maxReconnectDelay: 2_000,
  });
  const subscription = centrifuge.newSubscription(spec.channel, {
    getToken: async () => spec.channelToken,
    minResubscribeDelay: 100,
    maxResubscribeDelay: 2_000,
  });
  const follower: Follower = {
    spec,
    centrifuge,
    subscription,
    value: 0,
    lastDelivered: 0,
    subscribedOnce: false,
    loading: false,
    recovered: 0,
    reloaded: 0,
    firstAfterKill: null,
  };
  followers.push(follower);
  const ready = new Promise<void>((resolve) => subscription.once('subscribed', () => resolve()));
  subscription.on('subscribed', (ctx) => {
    const afterKill = killAt !== null && follower.subscribedOnce;
    follower.subscribedOnce = true;
    if (ctx.wasRecovering && ctx.recovered) {
      if (afterKill) follower.recovered += 1;
      return;
    }
    if (afterKill) follower.reloaded += 1;
    // Not recovered: messages may be missing, so the page reloads its state.
    follower.loading = true;
    void snapshot(spec.channel).then((n) => {
      follower.value = Math.max(follower.value, n);
      follower.loading = false;
    });
  });
  subscription.on('publication', (ctx) => {
    const { n, at } = ctx.data as { n: number; at: number };
    const now = Date.now();
    latencies.push([now, now - at]);
    if (killAt !== null && at > killAt && follower.firstAfterKill === null) follower.firstAfterKill = now;
    if (n <= follower.lastDelivered) duplicates += 1;
    else follower.lastDelivered = n;
    if (n <= follower.value) return; // already in the snapshot
    if (n !== follower.value + 1 && !follower.loading) silentGaps += 1;
    follower.value = n;
  });
  centrifuge.connect();
  subscription.subscribe();
  return ready;
}

async function start(specs: FollowerSpec[]) {
  const ready: Promise<void>[] = [];
  for (const spec of specs) {
    ready.push(open(spec));
    // Thousands of handshakes at once overflow the listen backlog; a small pause between them does not.
    if (ready.length % 50 === 0) await new Promise((resolve) => setTimeout(resolve, 25));
  }
  await Promise.all(ready);
  process.send?.({ type: 'ready' });
}

type Message =
  | { type: 'start'; specs: FollowerSpec[]; snapshotUrl: string }
  | { type: 'kill'; at: number }
  | { type: 'report' | 'stop' }
  | { type: 'final'; finals: Record<string, number> };

process.on('message', (message: Message) => {
  if (message.type === 'start') {
    snapshotUrl = message.snapshotUrl;
    void start(message.specs).catch((error) => process.send?.({ type: 'error', error: String(error) }));
  } else if (message.type === 'kill') killAt = message.at;
  else if (message.type === 'report') {
    const report: FailoverClientReport = {
      latencies,
      duplicates,
      silentGaps,
      recovered: followers.reduce((sum, f) => sum + f.recovered, 0),
      reloaded: followers.reduce((sum, f) => sum + f.reloaded, 0),
      firstAfterKill: followers.map((f) => f.firstAfterKill),
      nodes: followers.map((f) => f.spec.url),
      snapshotFailures,
    };
    process.send?.({ type: 'report', ...report });
    latencies = [];
  } else if (message.type === 'final') {
    const missing = followers.filter((f) => f.value < message.finals[f.spec.channel]!).length;
    const unsubscribed = followers.filter((f) => f.subscription.state !== 'subscribed').length;
    process.send?.({ type: 'final', missing, unsubscribed });
  } else {
    for (const follower of followers) follower.centrifuge.disconnect();
    setTimeout(() => process.exit(0), 200);
  }
});
