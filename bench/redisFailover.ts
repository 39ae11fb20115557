/**
 * `redis-failover` (issue 42): the gateway's Redis master dies under load. A Redis master, a replica and
 * three sentinels on 127.0.0.1 (packages/gateway/test/sentinelCluster.ts, as the Sentinel integration
 * test starts them), two `tdp gateway --config` processes whose Centrifugo config names the sentinels,
 * CLIENTS live `centrifuge` clients from a few processes (bench/redisFailoverClient.ts), half on each
 * node, each following one of CHANNELS channels, and one publisher per channel publishing numbered
 * messages through the nodes' server API in turn (a failed publish is retried as it is, on the other
 * node). After a steady phase the master is SIGKILLed; Sentinel promotes the replica and the nodes follow
 * it. Once publishing works again through both nodes and every client has a message published after the
 * kill, the load goes on, then each channel gets a final message that every client must show.
 *
 * Measured: lost (clients without their channel's final message), duplicated (a message delivered twice
 * to a client), numbers skipped without a snapshot, time to promotion, to publishing through each node
 * and to every client served again, publish → receive p99 before / during / after, and how the
 * subscriptions came back (recovered from history or reloaded a snapshot). Run twice: with the replica
 * in sync, and with its replication held for the last second (what it had not received dies with the
 * master, as with asynchronous replication under lag).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { SignJWT } from 'jose';
import { freePort } from '../packages/cli/src/embeddedPostgres.ts';
import {
  masterName,
  requireSentinelBinaries,
  startSentinelCluster,
} from '../packages/gateway/test/sentinelCluster.ts';
import { centrifugoConfig, defaultSettings } from '../packages/server/src/main.ts';
import { newTokenSecret } from '../test/centrifugo.ts';
import { ProcessGroup } from './chaos/processes.ts';
import { until } from './chaos/system.ts';
import { childProcesses } from './realtimeProcesses.ts';
import type { FailoverClientReport, FollowerSpec } from './redisFailoverClient.ts';
import { p99Of } from './support.ts';

interface Sizes {
  clients: number;
  processes: number;
  channels: number;
  /** Messages per second on each channel. */
  rate: number;
  steadyMs: number;
  afterMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface RedisFailoverResult {
  system: string;
  clients: number;
  channels: number;
  rate: number;
  published: number;
  publishFailures: number;
  /** Seconds after the kill: Sentinel named the replica; a publish through each node succeeded again. */
  promotedSeconds: number | null;
  publishingSeconds: (number | null)[];
  /** Seconds after the kill until every client had a message published after it. */
  servedSeconds: number | null;
  lost: number;
  stuck: number;
  /** Clients without a message published after the kill, per node (node 1, node 2). */
  stuckByNode: number[];
  /**
   * At the end, on the master Sentinel names: the connections subscribed to each channel's Redis
   * channel (one per node that has clients on it; fewer means a node no longer hears that channel).
   */
  redisSubscribers: Record<string, number>;
  duplicated: number;
  silentGaps: number;
  recovered: number;
  reloaded: number;
  snapshotFailures: number;
  p99: { before: number | null; during: number | null; after: number | null };
  exited: string[];
}

async function startNodes(group: ProcessGroup, config: Record<string, unknown>, directory: string) {
  return Promise.all(
    [1, 2].map(async (i) => {
      const port = await freePort();
      const file = join(directory, `gateway-${i}.json`);
      await writeFile(file, JSON.stringify({ ...config, http_server: { address: '127.0.0.1', port } }));
      const node = group.add(`gateway-${i}`, ['packages/cli/src/main.ts', 'gateway', '--config', file], {
        TDP_LOG_LEVEL: 'warn',
      });
      node.start();
      const base = `http://127.0.0.1:${port}`;
      await until(
        () =>
          fetch(`${base}/health`).then(
            (r) => r.ok,
            () => false,
          ),
        30_000,
        `gateway-${i} up`,
      );
      return { base, ws: `ws://127.0.0.1:${port}/connection/websocket` };
    }),
  );
}

/** One publisher per channel: the next number, through the nodes in turn, retried until accepted. */
function publishers(channels: string[], bases: string[], apiKey: string, rate: number) {
  const current = new Map(channels.map((channel) => [channel, 0]));
  let running = true;
  let failures = 0;
  let published = 0;
  /** Per node, the first accepted publish after `since` (set at the kill). */
  let since = Number.POSITIVE_INFINITY;
  const backAt: (number | null)[] = bases.map(() => null);
  const publishOne = async (channel: string, n: number) => {
    const at = Date.now();
    for (let attempt = 0; ; attempt++) {
      const node = (n + attempt) % bases.length;
      const ok = await fetch(`${bases[node]}/api/publish`, {
        method: 'POST',
        headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
        body: JSON.stringify({ channel, data: { n, at } }),
        signal: AbortSignal.timeout(3_000),
      }).then(
        async (r) => r.ok && !('error' in ((await r.json()) as object)),
        () => false,
      );
      if (ok) {
        published += 1;
        if (Date.now() > since && backAt[node] === null) backAt[node] = Date.now();
        return;
      }
      failures += 1;
      await sleep(50);
    }
  };
  const loops = channels.map(async (channel) => {
    while (running) {
      const n = current.get(channel)! + 1;
      current.set(channel, n);
      await publishOne(channel, n);
      await sleep(1000 / rate);
    }
  });
  return {
    current,
    backAt,
    markKill: (at: number) => {
      since = at;
    },
    stats: () => ({ published, failures }),
    /** Stops the loops, then one final message per channel; the final number of each. */
    finish: async () => {
      running = false;
      await Promise.all(loops);
      await Promise.all(
        channels.map(async (channel) => {
          const n = current.get(channel)! + 1;
          current.set(channel, n);
          await publishOne(channel, n);
        }),
      );
      return Object.fromEntries(current);
    },
  };
}

function startClients(processes: number, specs: FollowerSpec[], snapshotUrl: string) {
  const { ask, tell, stop } = childProcesses('bench/redisFailoverClient.ts', processes);
  return {
    ready: () =>
      ask('start', 'ready', (p) => ({ snapshotUrl, specs: specs.filter((_, i) => i % processes === p) })),
    kill: (at: number) => tell({ type: 'kill', at }),
    report: async (): Promise<FailoverClientReport> => {
      const reports = await ask<FailoverClientReport>('report', 'report');
      const sum = (key: 'duplicates' | 'silentGaps' | 'recovered' | 'reloaded' | 'snapshotFailures') =>
        reports.reduce((total, r) => total + r[key], 0);
      return {
        latencies: reports.flatMap((r) => r.latencies),
        firstAfterKill: reports.flatMap((r) => r.firstAfterKill),
        nodes: reports.flatMap((r) => r.nodes),
        duplicates: sum('duplicates'),
        silentGaps: sum('silentGaps'),
        recovered: sum('recovered'),
        reloaded: sum('reloaded'),
        snapshotFailures: sum('snapshotFailures'),
      };
    },
    final: async (finals: Record<string, number>) => {
      const answers = await ask<{ missing: number; unsubscribed: number }>('final', 'final', () => ({
        finals,
      }));
      return {
        missing: answers.reduce((sum, a) => sum + a.missing, 0),
        unsubscribed: answers.reduce((sum, a) => sum + a.unsubscribed, 0),
      };
    },
    stop,
  };
}

/**
 * `lagging`: the replica's link is held for a second before the kill, so the publications of that second
 * reach the clients but die with the master, and the promoted replica hands their offsets out again.
 */
export async function redisFailover(sizes: Sizes, lagging: boolean): Promise<RedisFailoverResult> {
  const cluster = await startSentinelCluster();
  const directory = await mkdtemp(join(tmpdir(), 'tdp-redis-failover-'));
  const group = new ProcessGroup('redis-failover');
  const apiKey = `failover-${randomBytes(8).toString('hex')}`;
  const config = centrifugoConfig({
    tokenSecret: newTokenSecret(),
    apiKey,
    realtimeHistory: defaultSettings.realtimeHistory,
  });
  const key = new TextEncoder().encode(
    (config.client as { token: { hmac_secret_key: string } }).token.hmac_secret_key,
  );
  const sign = (claims: Record<string, unknown>) =>
    new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('2h').sign(key);
  const prefix = `tdp-failover-${randomBytes(4).toString('hex')}`;
  const channels = Array.from({ length: sizes.channels }, (_, i) => `task_detail:failover/${i}`);
  let clients: ReturnType<typeof startClients> | null = null;
  let load: ReturnType<typeof publishers> | null = null;
  const snapshots = createServer((request, response) => {
    const channel = new URL(request.url ?? '/', 'http://x').searchParams.get('channel') ?? '';
    response.end(String(load?.current.get(channel) ?? 0));
  });
  try {
    const nodes = await startNodes(
      group,
      {
        ...config,
        engine: {
          type: 'redis',
          redis: {
            sentinel_address: cluster.sentinels.map((s) => `${s.host}:${s.port}`),
            sentinel_master_name: masterName,
            prefix,
          },
        },
      },
      directory,
    );
    await new Promise<void>((resolve) => snapshots.listen(0, '127.0.0.1', resolve));
    const snapshotUrl = `http://127.0.0.1:${(snapshots.address() as { port: number }).port}/current`;
    const specs: FollowerSpec[] = await Promise.all(
      Array.from({ length: sizes.clients }, async (_, i) => {
        const channel = channels[i % channels.length]!;
        return {
          url: nodes[Math.floor(i / channels.length) % 2]!.ws,
          channel,
          token: await sign({ sub: `user-${i}` }),
          channelToken: await sign({ sub: `user-${i}`, channel }),
        };
      }),
    );
    load = publishers(
      channels,
      nodes.map((n) => n.base),
      apiKey,
      sizes.rate,
    );
    clients = startClients(sizes.processes, specs, snapshotUrl);
    await clients.ready();
    console.log(
      `  ${sizes.clients} clients subscribed; steady phase${lagging ? ', then the replica held 1 s' : ''}`,
    );
    const latencies: [number, number][] = [];
    const collect = async () => {
      const report = await clients!.report();
      latencies.push(...report.latencies);
      return report;
    };
    await sleep(sizes.steadyMs);
    if (lagging) {
      cluster.holdReplication();
      await sleep(1_000);
    }
    await collect();
    const killAt = Date.now();
    load.markKill(killAt);
    clients.kill(killAt);
    cluster.killMaster();
    let promotedAt: number | null = null;
    let servedAt: number | null = null;
    let report = await collect();
    while (Date.now() - killAt < 90_000) {
      if (promotedAt === null && (await cluster.currentMasterPort().catch(() => 0)) === cluster.replicaPort)
        promotedAt = Date.now();
      report = await collect();
      if (report.firstAfterKill.every((t) => t !== null) && load.backAt.every((t) => t !== null)) {
        servedAt = Math.max(...report.firstAfterKill.map(Number));
        break;
      }
      await sleep(250);
    }
    console.log(
      `  TDP gateway: ${servedAt === null ? 'not every client served again' : 'served again'}; after phase`,
    );
    await sleep(sizes.afterMs);
    const finals = await load.finish();
    let final = await clients.final(finals);
    for (let waited = 0; (final.missing > 0 || final.unsubscribed > 0) && waited < 30_000; waited += 500) {
      await sleep(500);
      final = await clients.final(finals);
    }
    report = await collect();
    const master = new Redis({ host: '127.0.0.1', port: await cluster.currentMasterPort() });
    const numsub = (await master.call('PUBSUB', 'NUMSUB', ...channels.map((c) => `${prefix}.pub.${c}`))) as (
      | string
      | number
    )[];
    master.disconnect();
    const redisSubscribers = Object.fromEntries(channels.map((c, i) => [c, Number(numsub[2 * i + 1])]));
    const seconds = (at: number | null) => (at === null ? null : (at - killAt) / 1000);
    const served = servedAt ?? Number.POSITIVE_INFINITY;
    const inPhase = (from: number, to: number) =>
      p99Of(latencies.filter(([at]) => at >= from && at < to).map(([, ms]) => ms));
    return {
      system: lagging ? 'TDP gateway, replica 1 s behind' : 'TDP gateway',
      clients: sizes.clients,
      channels: sizes.channels,
      rate: sizes.rate,
      published: load.stats().published,
      publishFailures: load.stats().failures,
      promotedSeconds: seconds(promotedAt),
      publishingSeconds: load.backAt.map(seconds),
      servedSeconds: seconds(servedAt),
      lost: final.missing,
      stuck: final.unsubscribed + report.firstAfterKill.filter((t) => t === null).length,
      stuckByNode: nodes.map(
        (node) => report.firstAfterKill.filter((t, i) => t === null && report.nodes[i] === node.ws).length,
      ),
      redisSubscribers,
      duplicated: report.duplicates,
      silentGaps: report.silentGaps,
      recovered: report.recovered,
      reloaded: report.reloaded,
      snapshotFailures: report.snapshotFailures,
      p99: {
        before: inPhase(0, killAt),
        during: inPhase(killAt, served + 1),
        after: inPhase(served + 1, Number.POSITIVE_INFINITY),
      },
      exited: group.ownExits.map((e) => `${e.name}: ${e.code ?? e.signal}`),
    };
  } finally {
    await clients?.stop();
    snapshots.close();
    await group.close(35_000);
    await cluster.stop();
    await rm(directory, { recursive: true, force: true });
  }
}

const s = (seconds: number | null) => (seconds === null ? 'never' : seconds.toFixed(1));
const ms = (value: number | null) => (value === null ? '—' : value.toFixed(0));

export function redisFailoverTable(results: RedisFailoverResult[]): string {
  const header =
    '| scenario | system | clients | published / refused | lost | dup | silent gaps | stuck | exited | promoted s | publishing back s (node 1 / 2) | all served s | from history / snapshot | p99 before ms | p99 during ms | p99 after ms |';
  const rows = results.map(
    (r) =>
      `| redis-failover | ${r.system} | ${r.clients} | ${r.published} / ${r.publishFailures} | ${r.lost} | ${r.duplicated} | ${r.silentGaps} | ${r.stuck} | ${r.exited.length} | ${s(r.promotedSeconds)} | ${r.publishingSeconds.map(s).join(' / ')} | ${s(r.servedSeconds)} | ${r.recovered} / ${r.reloaded} | ${ms(r.p99.before)} | ${ms(r.p99.during)} | ${ms(r.p99.after)} |`,
  );
  return [header, `|${' --- |'.repeat(16)}`, ...rows].join('\n');
}

/**
 * The drill on TDP's gateway, with the replica in sync and lagging; true when every client ends with
 * every final message, none is stuck and none skipped a message unnoticed.
 */
export async function runRedisFailover(options: { smoke: boolean }): Promise<boolean> {
  if (!requireSentinelBinaries())
    throw new Error('redis-server and redis-sentinel are required: run scripts/services.sh');
  const sizes: Sizes = options.smoke
    ? { clients: 200, processes: 1, channels: 4, rate: 10, steadyMs: 5_000, afterMs: 5_000 }
    : { clients: 2_000, processes: 2, channels: 8, rate: 5, steadyMs: 10_000, afterMs: 10_000 };
  console.log(
    `redis-failover${options.smoke ? ' (SMOKE)' : ''}: ${sizes.clients} clients on 2 gateway nodes (Redis through 3 sentinels), ${sizes.channels} channels × ${sizes.rate} messages/s; SIGKILL of the Redis master after ${sizes.steadyMs / 1000} s`,
  );
  const results: RedisFailoverResult[] = [];
  for (const lagging of [false, true]) {
    const result = await redisFailover(sizes, lagging);
    results.push(result);
    console.log(
      `  ${result.system}: promoted in ${s(result.promotedSeconds)} s, publishing back in ${result.publishingSeconds.map(s).join(' / ')} s, every client served in ${s(result.servedSeconds)} s; ${result.lost} lost, ${result.duplicated} duplicated, ${result.silentGaps} silent gaps, ${result.stuck} stuck (per node ${result.stuckByNode.join(' / ')}; Redis subscribers per channel ${Object.values(result.redisSubscribers).join(' ')}); ${result.recovered} recovered, ${result.reloaded} reloaded a snapshot`,
    );
  }
  console.log(`\n${redisFailoverTable(results)}\n`);
  mkdirSync('artifacts', { recursive: true });
  writeFileSync(
    `artifacts/redis-failover${options.smoke ? '-smoke' : ''}.json`,
    `${JSON.stringify(results, null, 2)}\n`,
  );
  return results.every((r) => r.lost === 0 && r.stuck === 0 && r.silentGaps === 0);
}
