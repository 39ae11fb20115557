/**
 * Two gateway nodes on the Redis engine through Sentinel (a master, a replica, three sentinels, all
 * started here): the master is SIGKILLed while a publisher keeps publishing numbered messages on
 * several channels; Sentinel promotes the replica, both nodes follow it, and every live `centrifuge`
 * client ends with every channel's final publication — by recovery, or by reloading a snapshot where
 * the failover may have lost publications — and never skips a message without noticing.
 */
import { randomUUID } from 'node:crypto';
import { Centrifuge } from 'centrifuge';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  type CentrifugoConfigError,
  type Gateway,
  parseSentinelAddresses,
  RedisTargetError,
  readCentrifugoConfig,
} from '../src/index.ts';
import { type Node, redisNodes } from './redisNodes.ts';
import {
  masterName,
  requireSentinelBinaries,
  type SentinelCluster,
  startSentinelCluster,
  until,
} from './sentinelCluster.ts';

const available = requireSentinelBinaries();

const secret = 'sentinel-test-secret-of-enough-length';
const sign = (claims: Record<string, unknown>) =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(secret));

/** What a page does with a channel: a snapshot when not recovered, then each next message in turn. */
interface Follower {
  channel: string;
  value: number;
  snapshots: number;
  /** Messages that skipped ahead without a snapshot: a gap the client did not notice. */
  silentGaps: string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!available)('the Redis engine through Sentinel, across a failover', () => {
  const prefix = `tdp.test.${randomUUID()}`;
  const channels = [1, 2, 3].map((i) => `task_detail:t/${i}-${randomUUID()}`);
  let cluster: SentinelCluster;
  const clients: Centrifuge[] = [];
  /** The publisher's truth (what a snapshot reads): the newest message of each channel. */
  const current = new Map<string, number>(channels.map((channel) => [channel, 0]));

  const nodes = redisNodes(secret, () => ({
    sentinels: cluster.sentinels,
    masterName,
    prefix,
    history: () => ({ size: 1000, ttlMs: 600_000 }),
  }));

  const follow = async (node: Node, user: string, channel: string): Promise<[Follower, Centrifuge]> => {
    const client = new Centrifuge(node.url, {
      websocket: WebSocket,
      token: await sign({ sub: user }),
      minReconnectDelay: 50,
      maxReconnectDelay: 300,
    });
    clients.push(client);
    const follower: Follower = { channel, value: 0, snapshots: 0, silentGaps: [] };
    const sub = client.newSubscription(channel, {
      getToken: () => sign({ sub: user, channel }),
      minResubscribeDelay: 50,
      maxResubscribeDelay: 300,
    });
    sub.on('subscribed', (ctx) => {
      if (ctx.recovered) return;
      follower.snapshots += 1;
      follower.value = Math.max(follower.value, current.get(channel)!);
    });
    sub.on('publication', (ctx) => {
      const n = (ctx.data as { n: number }).n;
      if (n <= follower.value) return; // already in the snapshot, or a publish retried
      if (n !== follower.value + 1) follower.silentGaps.push(`${follower.value} -> ${n}`);
      follower.value = n;
    });
    const subscribed = new Promise((resolve) => sub.once('subscribed', resolve));
    client.connect();
    sub.subscribe();
    await subscribed;
    return [follower, client];
  };

  beforeAll(async () => {
    cluster = await startSentinelCluster();
    await nodes.start();
    await nodes.start();
  }, 60_000);

  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await nodes.close();
    await cluster?.stop();
  });

  it('clients of both nodes end with every final publication when the master is killed', async () => {
    const [one, two] = nodes.list as [Node, Node];
    const followers: Follower[] = [];
    for (const [i, channel] of channels.entries())
      for (const node of [one, two])
        followers.push((await follow(node, `u${i}`, channel))[0], (await follow(node, `v${i}`, channel))[0]);
    // Pages that are away across the failover, and come back once the new master has gone past the
    // positions they left at: positions the lost publications had, which the new master hands out again.
    const away = await Promise.all(channels.map((channel, i) => follow(one, `a${i}`, channel)));
    followers.push(...away.map(([follower]) => follower));

    // Each channel's next message, through either node in turn; a failed publish is retried as it is.
    let publishing = true;
    const failures: unknown[] = [];
    const acknowledgedBy = new Set<Gateway>();
    const publisher = async (channel: string, index: number) => {
      while (publishing) {
        const n = current.get(channel)! + 1;
        current.set(channel, n);
        for (let attempt = 0; ; attempt += 1) {
          const node = nodes.list[(n + attempt + index) % 2]!;
          try {
            await node.gateway.publish(channel, { n });
            acknowledgedBy.add(node.gateway);
            break;
          } catch (error) {
            failures.push(error);
            await sleep(50);
          }
        }
        await sleep(15);
      }
    };
    const publishers = channels.map(publisher);

    await expect
      .poll(() => Math.min(...followers.map((f) => f.value)), { timeout: 10_000 })
      .toBeGreaterThan(20);
    const snapshotsBefore = followers.map((f) => f.snapshots);
    // The last publications before the kill reach the clients but never the replica: lost with the master.
    cluster.holdReplication();
    const heldAt = [...current.values()];
    await expect.poll(() => away.every(([follower], i) => follower.value > heldAt[i]! + 5)).toBe(true);
    for (const [, client] of away) client.disconnect();
    cluster.killMaster();
    await until(
      'Sentinel to promote the replica',
      async () => (await cluster.currentMasterPort()) === cluster.replicaPort,
    );
    // Publishing goes on through the new master, by both nodes.
    acknowledgedBy.clear();
    await until('publishes through both nodes to succeed again', async () => acknowledgedBy.size === 2);
    const resumedAt = [...current.values()];
    await expect
      .poll(() => channels.every((channel, i) => current.get(channel)! > resumedAt[i]! + 30), {
        timeout: 15_000,
      })
      .toBe(true);
    for (const [, client] of away) client.connect();
    await sleep(500);
    publishing = false;
    await Promise.all(publishers);

    await expect
      .poll(() => followers.map((f) => f.value), { timeout: 20_000 })
      .toEqual(followers.map((f) => current.get(f.channel)));
    // Nothing was skipped unnoticed: every gap the failover made was covered by a snapshot.
    expect(followers.flatMap((f) => f.silentGaps)).toEqual([]);
    // The failover cost each subscription a snapshot (its channel's epoch changed with the master).
    followers.forEach((f, i) => {
      expect(f.snapshots).toBeGreaterThan(snapshotsBefore[i]!);
    });

    // Both nodes serve new clients again: one on each receives what the other node publishes.
    const channel = `task_detail:t/after-${randomUUID()}`;
    current.set(channel, 0);
    const [onOne] = await follow(one, 'late1', channel);
    const [onTwo] = await follow(two, 'late2', channel);
    await two.gateway.publish(channel, { n: 1 });
    await one.gateway.publish(channel, { n: 2 });
    await expect.poll(() => [onOne.value, onTwo.value]).toEqual([2, 2]);
  }, 90_000);
});

describe('naming the sentinels', () => {
  it('takes host:port lists and refuses a bad address with a message naming it', () => {
    expect(parseSentinelAddresses('127.0.0.1:26379, [::1]:26380')).toEqual([
      { host: '127.0.0.1', port: 26379 },
      { host: '::1', port: 26380 },
    ]);
    expect(() => parseSentinelAddresses('127.0.0.1')).toThrow('"127.0.0.1" is not a sentinel address');
    expect(() => parseSentinelAddresses('a:1,b:99999')).toThrow('"b:99999" is not a sentinel address');
    expect(() => parseSentinelAddresses(' ')).toThrow(RedisTargetError);
  });

  it("reads Centrifugo v6's sentinel keys, and names what is missing", () => {
    const { redis } = readCentrifugoConfig({
      engine: {
        type: 'redis',
        redis: {
          sentinel_address: ['127.0.0.1:26379', '127.0.0.1:26380'],
          sentinel_master_name: 'mymaster',
          sentinel_password: 's3',
          password: 'm3',
          prefix: 'p',
        },
      },
    });
    expect(redis).toEqual({
      sentinels: [
        { host: '127.0.0.1', port: 26379 },
        { host: '127.0.0.1', port: 26380 },
      ],
      masterName: 'mymaster',
      password: 'm3',
      sentinelPassword: 's3',
      prefix: 'p',
    });
    const problems = (redis: Record<string, unknown>) => {
      try {
        readCentrifugoConfig({ engine: { type: 'redis', redis } });
        return [];
      } catch (error) {
        return (error as CentrifugoConfigError).problems;
      }
    };
    expect(problems({ sentinel_address: '127.0.0.1:26379' })).toEqual([
      'engine.redis.sentinel_master_name: required with sentinel_address',
    ]);
    expect(problems({ sentinel_address: 'nowhere', sentinel_master_name: 'm' })).toEqual([
      'engine.redis.sentinel_address: "nowhere" is not a sentinel address (host:port, e.g. 127.0.0.1:26379)',
    ]);
  });
});
