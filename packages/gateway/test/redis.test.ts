/**
 * Two gateway nodes on the Redis engine serve the same channels: the real `centrifuge` SDK connected to
 * node 1 receives what node 2 publishes, and recovers from the history kept in Redis.
 */
import { randomUUID } from 'node:crypto';
import { Centrifuge } from 'centrifuge';
import { Redis } from 'ioredis';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { redisUrl, requireRedis } from './redisAvailable.ts';
import { type Node, redisNodes } from './redisNodes.ts';

const available = await requireRedis();

const secret = 'redis-test-secret-of-enough-length';
const sign = (claims: Record<string, unknown>) =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(secret));

describe.skipIf(!available)('two gateway nodes on Redis', () => {
  // Keys of their own, so the test never meets another run's channels.
  const prefix = `tdp.test.${randomUUID()}`;
  const clients: Centrifuge[] = [];

  const nodes = redisNodes(secret, () => ({
    url: redisUrl,
    prefix,
    history: () => ({ size: 100, ttlMs: 60_000 }),
  }));

  const connect = async (node: Node, user: string) => {
    const client = new Centrifuge(node.url, {
      websocket: WebSocket,
      token: await sign({ sub: user }),
      minReconnectDelay: 50,
      maxReconnectDelay: 200,
    });
    clients.push(client);
    return client;
  };

  let one: Node;
  let two: Node;

  /** A client of node 1 subscribed to a channel of its own; what it receives, in order. */
  const follow = async (user: string) => {
    const channel = `task_detail:t/${randomUUID()}`;
    const client = await connect(one, user);
    client.connect();
    const sub = client.newSubscription(channel, { getToken: () => sign({ sub: user, channel }) });
    const seen: { data: unknown; offset: number }[] = [];
    sub.on('publication', (ctx) => seen.push({ data: ctx.data, offset: Number(ctx.offset) }));
    const subscribed = new Promise((resolve) => sub.once('subscribed', resolve));
    sub.subscribe();
    await subscribed;
    return { channel, client, sub, seen, data: () => seen.map((p) => p.data) };
  };
  beforeAll(async () => {
    one = await nodes.start();
    two = await nodes.start();
  });
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await nodes.close();
    const cleanup = new Redis(redisUrl);
    const keys = await cleanup.keys(`${prefix}.*`);
    if (keys.length > 0) await cleanup.del(...keys);
    cleanup.disconnect();
  });

  it('a client on node 1 receives, in order and with offsets, what node 2 publishes', async () => {
    const { channel, sub, seen, data } = await follow('u1');
    const positions = [];
    for (let i = 1; i <= 5; i += 1) positions.push(await two.gateway.publish(channel, { n: i }));
    await expect.poll(() => seen.length).toBe(5);
    expect(data()).toEqual([1, 2, 3, 4, 5].map((n) => ({ n })));
    expect(seen.map((p) => p.offset)).toEqual(positions.map((p) => p.offset));
    // Both nodes see one stream: same epoch, and node 1's history has node 2's publications.
    const history = await sub.history({ limit: -1 });
    expect(history.publications.map((p) => p.data)).toEqual([1, 2, 3, 4, 5].map((n) => ({ n })));
    expect(history.epoch).toBe(positions[0]!.epoch);
  });

  it('a publish repeated through the other node with the same idempotency key is delivered once', async () => {
    const { channel, sub, data } = await follow('u4');
    // What the relay does when the node it published through died before answering: sends it again.
    const first = await one.gateway.publish(channel, { n: 1 }, { idempotencyKey: 'message-1' });
    const again = await two.gateway.publish(channel, { n: 1 }, { idempotencyKey: 'message-1' });
    const other = await two.gateway.publish(channel, { n: 2 }, { idempotencyKey: 'message-2' });
    expect(again).toEqual(first);
    expect(other.offset).toBe(first.offset + 1);
    await expect.poll(() => data().length).toBe(2);
    expect(data()).toEqual([{ n: 1 }, { n: 2 }]);
    expect((await sub.history({ limit: -1 })).publications.map((p) => p.data)).toEqual([{ n: 1 }, { n: 2 }]);
    // The key is the channel's: the same key on another channel publishes.
    const elsewhere = await two.gateway.publish(`${channel}-b`, { n: 1 }, { idempotencyKey: 'message-1' });
    expect(elsewhere.offset).toBe(1);
  });

  it('a client away for 2 seconds while node 2 publishes 20 recovers all 20 in order from Redis', async () => {
    const { channel, client, sub, data } = await follow('u2');
    await two.gateway.publish(channel, { n: 0 });
    await expect.poll(() => data().length).toBe(1);
    client.disconnect();
    for (let i = 1; i <= 20; i += 1) {
      await two.gateway.publish(channel, { n: i });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const again = new Promise<{ recovered: boolean }>((resolve) => sub.once('subscribed', resolve));
    client.connect();
    expect(await again).toMatchObject({ recovered: true });
    await expect.poll(() => data().length).toBe(21);
    expect(data()).toEqual(Array.from({ length: 21 }, (_, n) => ({ n })));
  });

  it('a node that lost its Redis link sends its clients to recover: they resubscribe and miss nothing', async () => {
    const { channel, sub, data } = await follow('u3');
    const states: string[] = [];
    sub.on('subscribing', (ctx) => states.push(`subscribing:${ctx.code}`));
    sub.on('subscribed', (ctx) => states.push(`subscribed:${ctx.recovered}`));
    await two.gateway.publish(channel, { n: 1 });
    await expect.poll(() => data().length).toBe(1);
    // What the engine reports after its pub/sub connection came back: publications may have been lost.
    one.gateway.resync();
    await two.gateway.publish(channel, { n: 2 });
    await expect.poll(() => states).toContain('subscribing:2500');
    await expect.poll(() => data()).toEqual([{ n: 1 }, { n: 2 }]);
    expect(states.at(-1)).toBe('subscribed:true');
  });
});
