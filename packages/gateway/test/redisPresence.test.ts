/**
 * Presence across nodes on the Redis engine, with the real `centrifuge` SDK: clients of two gateway
 * nodes see one presence and one presence count per channel; an entry stays while its node refreshes it,
 * leaves with its client, and one that nobody refreshes (its node died) is gone after the presence TTL.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { Centrifuge, type Subscription } from 'centrifuge';
import { Redis } from 'ioredis';
import { SignJWT } from 'jose';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Gateway, RedisEngine } from '../src/index.ts';
import { redisUrl, requireRedis } from './redisAvailable.ts';

const available = await requireRedis();

const secret = 'redis-test-secret-of-enough-length';
const presenceTtlMs = 60_000;

describe.skipIf(!available)('presence on two gateway nodes on Redis', () => {
  const prefix = `tdp.test.${randomUUID()}`;
  /** The engines' clock: moved past the presence TTL instead of waiting for it. */
  let now = Date.now();
  const engines: RedisEngine[] = [];
  const gateways: Gateway[] = [];
  const servers: Server[] = [];
  const clients: Centrifuge[] = [];

  const startNode = async (): Promise<string> => {
    const engine = new RedisEngine({
      url: redisUrl,
      prefix,
      history: () => ({ size: 0, ttlMs: 0 }),
      presenceTtlMs,
      now: () => now,
    });
    engines.push(engine);
    const gateway = new Gateway({
      hmacKey: secret,
      apiKey: 'api-key',
      engine,
      presenceUpdateIntervalMs: 100,
      channels: {
        withoutNamespace: {},
        namespaces: {
          chat: { presence: true, allowSubscribeForClient: true, allowPresenceForSubscriber: true },
          room: {
            presence: true,
            joinLeave: true,
            allowSubscribeForClient: true,
            allowPresenceForSubscriber: true,
          },
        },
      },
    });
    await gateway.ready;
    gateways.push(gateway);
    const server = createServer((request, response) => {
      if (!gateway.handleHttp(request, response)) response.writeHead(404).end();
    });
    gateway.attach(server);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `ws://127.0.0.1:${(server.address() as { port: number }).port}`;
  };

  afterAll(async () => {
    for (const client of clients) client.disconnect();
    for (const gateway of gateways) await gateway.close();
    for (const server of servers) await new Promise((resolve) => server.close(resolve));
    const cleanup = new Redis(redisUrl);
    const keys = await cleanup.keys(`${prefix}.*`);
    if (keys.length > 0) await cleanup.del(...keys);
    cleanup.disconnect();
  });

  /** A person connected to `url`, subscribed to `channel`; their client id, subscription and join/leave. */
  async function join(url: string, user: string, channel: string) {
    const token = await new SignJWT({ sub: user, info: { name: user } })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('10m')
      .sign(new TextEncoder().encode(secret));
    const client = new Centrifuge(`${url}/connection/websocket`, { websocket: WebSocket, token });
    clients.push(client);
    const connected = new Promise<{ client: string }>((resolve) => client.once('connected', resolve));
    client.connect();
    const { client: id } = await connected;
    const sub = client.newSubscription(channel, { joinLeave: true });
    const heard: string[] = [];
    sub.on('join', (ctx) => heard.push(`join ${ctx.info.user}@${ctx.info.client}`));
    sub.on('leave', (ctx) => heard.push(`leave ${ctx.info.user}@${ctx.info.client}`));
    const subscribed = new Promise((resolve) => sub.once('subscribed', resolve));
    sub.subscribe();
    await subscribed;
    return { client, id, sub, heard };
  }

  const who = async (sub: Subscription) =>
    Object.values((await sub.presence()).clients)
      .map((c) => `${c.user}@${c.client}`)
      .sort();

  it('one presence per channel across the nodes, kept while refreshed, gone with its client or its node', async () => {
    const channel = 'chat:room';
    const [first, second] = [await startNode(), await startNode()];
    const alice = await join(first, 'alice', channel);
    const bob = await join(second, 'bob', channel);
    const aliceAgain = await join(second, 'alice', channel);

    const everyone = [`alice@${alice.id}`, `alice@${aliceAgain.id}`, `bob@${bob.id}`].sort();
    expect(await who(alice.sub)).toEqual(everyone);
    expect(await who(bob.sub)).toEqual(everyone);
    expect(await bob.sub.presenceStats()).toEqual({ numClients: 3, numUsers: 2 });
    // The server API of either node answers the same.
    const api = (url: string, method: string) =>
      fetch(`${url.replace('ws://', 'http://')}/api/${method}`, {
        method: 'POST',
        headers: { 'x-api-key': 'api-key' },
        body: JSON.stringify({ channel }),
      }).then((r) => r.json() as Promise<any>);
    expect(await api(first, 'presence_stats')).toEqual({ result: { num_clients: 3, num_users: 2 } });
    expect(Object.keys((await api(second, 'presence')).result.presence).sort()).toEqual(
      [alice.id, aliceAgain.id, bob.id].sort(),
    );
    expect(
      await fetch(`${first.replace('ws://', 'http://')}/api/presence`, {
        method: 'POST',
        headers: { 'x-api-key': 'api-key' },
        body: JSON.stringify({ channel: 'lobby' }),
      }).then((r) => r.json()),
    ).toEqual({ error: { code: 108, message: 'not available' } });
    // The connection token's info, as the other node's client sees it.
    expect((await bob.sub.presence()).clients[alice.id]).toMatchObject({
      user: 'alice',
      client: alice.id,
      connInfo: { name: 'alice' },
    });

    // Past the TTL the entries live on: their nodes refresh them while the clients stay.
    now += presenceTtlMs + 1;
    await expect.poll(() => who(alice.sub), { timeout: 5_000 }).toEqual(everyone);

    // A client that leaves leaves the presence every node sees once its node hears it (no TTL to wait).
    aliceAgain.client.disconnect();
    await expect.poll(() => alice.sub.presenceStats()).toEqual({ numClients: 2, numUsers: 2 });

    // An entry its node no longer refreshes (a node that died) is gone after the TTL; the rest stay.
    await engines[1]!.addPresence(channel, [{ user: 'ghost', client: 'ghost-client' }]);
    expect(await alice.sub.presenceStats()).toEqual({ numClients: 3, numUsers: 3 });
    now += presenceTtlMs + 1;
    await expect
      .poll(() => who(alice.sub), { timeout: 5_000 })
      .toEqual([`alice@${alice.id}`, `bob@${bob.id}`].sort());
    expect(await bob.sub.presenceStats()).toEqual({ numClients: 2, numUsers: 2 });
  });

  it('join and leave messages reach the subscribers on the other node', async () => {
    const channel = 'room:lobby';
    const [first, second] = [await startNode(), await startNode()];
    const bob = await join(second, 'bob', channel);
    const alice = await join(first, 'alice', channel);
    await expect.poll(() => bob.heard).toEqual([`join bob@${bob.id}`, `join alice@${alice.id}`]);
    await expect.poll(() => alice.heard).toEqual([`join alice@${alice.id}`]);
    alice.client.disconnect();
    await expect
      .poll(() => bob.heard)
      .toEqual([`join bob@${bob.id}`, `join alice@${alice.id}`, `leave alice@${alice.id}`]);
  });
});
