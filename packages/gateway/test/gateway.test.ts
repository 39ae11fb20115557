/**
 * The gateway against the real `centrifuge` SDK (5.8.0) in Node: server-side subscriptions from the
 * connection token, client subscriptions with subscription tokens, publications, history, recovery of
 * what was published while the client was away, and refusals of bad tokens.
 */
import { createServer, type Server } from 'node:http';
import { Centrifuge, type PublicationContext } from 'centrifuge';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Gateway } from '../src/index.ts';

const secret = 'test-secret-of-enough-length-for-hs256';
let server: Server;
let gateway: Gateway;
let url: string;
const clients: Centrifuge[] = [];

const sign = (claims: Record<string, unknown>, expiresIn = '10m') =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt()
    .setExpirationTime(expiresIn)
    .sign(new TextEncoder().encode(secret));

beforeAll(async () => {
  server = createServer();
  gateway = new Gateway({ hmacKey: secret, channelLimits: [{ prefix: 'task_detail:', max: 2 }] });
  gateway.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `ws://127.0.0.1:${(server.address() as { port: number }).port}/connection/websocket`;
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await gateway.close();
  await new Promise((resolve) => server.close(resolve));
});

function connect(token: string | (() => Promise<string>)) {
  const client = new Centrifuge(url, {
    websocket: WebSocket,
    ...(typeof token === 'string' ? { token } : { getToken: token }),
    minReconnectDelay: 50,
    maxReconnectDelay: 200,
  });
  clients.push(client);
  return client;
}

const next = <T>(register: (resolve: (value: T) => void) => void) =>
  new Promise<T>((resolve) => register(resolve));

describe('gateway with the centrifuge SDK', () => {
  it('connects with a token whose channels are server-side subscriptions, and receives their publications', async () => {
    const client = connect(await sign({ sub: 'u1', channels: ['task_user:t1/u1'] }));
    const subscribed = next<{ channel: string }>((resolve) => client.on('subscribed', resolve));
    const connected = next<{ client: string }>((resolve) => client.on('connected', resolve));
    client.connect();
    expect((await connected).client).toMatch(/^[0-9a-f-]{36}$/);
    expect((await subscribed).channel).toBe('task_user:t1/u1');
    const received = next<{ channel: string; data: unknown }>((resolve) => client.on('publication', resolve));
    gateway.publish('task_user:t1/u1', { kind: 'task.summary', taskId: 'a' });
    expect(await received).toMatchObject({
      channel: 'task_user:t1/u1',
      data: { kind: 'task.summary', taskId: 'a' },
    });
  });

  it('subscribes with a subscription token, gets publications in order with offsets, and reads history', async () => {
    const client = connect(await sign({ sub: 'u2' }));
    client.connect();
    const channel = 'task_detail:t1/task-2';
    const sub = client.newSubscription(channel, { getToken: () => sign({ sub: 'u2', channel }) });
    const publications: PublicationContext[] = [];
    sub.on('publication', (ctx) => publications.push(ctx));
    const subscribed = next((resolve) => sub.on('subscribed', resolve));
    sub.subscribe();
    await subscribed;
    for (let i = 1; i <= 3; i += 1) gateway.publish(channel, { n: i });
    await expect.poll(() => publications.length).toBe(3);
    expect(publications.map((p) => p.data)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    const offsets = publications.map((p) => Number(p.offset));
    expect(offsets[1]).toBe(offsets[0]! + 1);
    const history = await sub.history({ limit: 10 });
    expect(history.publications.map((p) => p.data)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
  });

  it('recovers what was published while it was away, after a reconnect', async () => {
    const channel = 'task_detail:t1/task-3';
    const client = connect(await sign({ sub: 'u3' }));
    client.connect();
    const sub = client.newSubscription(channel, { getToken: () => sign({ sub: 'u3', channel }) });
    const seen: unknown[] = [];
    sub.on('publication', (ctx) => seen.push(ctx.data));
    const first = next((resolve) => sub.once('subscribed', resolve));
    sub.subscribe();
    await first;
    gateway.publish(channel, { n: 1 });
    await expect.poll(() => seen.length).toBe(1);
    // The connection drops for 2 seconds; 20 publications happen meanwhile.
    client.disconnect();
    for (let n = 2; n <= 21; n += 1) {
      await gateway.publish(channel, { n });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const again = next<{ recovered: boolean; wasRecovering: boolean }>((resolve) =>
      sub.once('subscribed', resolve),
    );
    client.connect();
    const ctx = await again;
    expect(ctx).toMatchObject({ wasRecovering: true, recovered: true });
    await expect.poll(() => seen.length).toBe(21);
    expect(seen).toEqual(Array.from({ length: 21 }, (_, i) => ({ n: i + 1 })));
  });

  it('does not pretend to recover when the history it would need has expired', async () => {
    const shortServer = createServer();
    const short = new Gateway({ hmacKey: secret, history: () => ({ size: 100, ttlMs: 300 }) });
    short.attach(shortServer);
    await new Promise<void>((resolve) => shortServer.listen(0, '127.0.0.1', resolve));
    try {
      const channel = 'task_detail:t1/task-expired';
      const client = new Centrifuge(
        `ws://127.0.0.1:${(shortServer.address() as { port: number }).port}/connection/websocket`,
        {
          websocket: WebSocket,
          token: await sign({ sub: 'u8' }),
          minReconnectDelay: 50,
          maxReconnectDelay: 200,
        },
      );
      clients.push(client);
      client.connect();
      const sub = client.newSubscription(channel, { getToken: () => sign({ sub: 'u8', channel }) });
      const seen: unknown[] = [];
      sub.on('publication', (ctx) => seen.push(ctx.data));
      const first = next((resolve) => sub.once('subscribed', resolve));
      sub.subscribe();
      await first;
      await short.publish(channel, { n: 1 });
      await expect.poll(() => seen.length).toBe(1);
      client.disconnect();
      await short.publish(channel, { n: 2 });
      await new Promise((resolve) => setTimeout(resolve, 500));
      const again = next<{ recovered: boolean; wasRecovering: boolean }>((resolve) =>
        sub.once('subscribed', resolve),
      );
      client.connect();
      expect(await again).toMatchObject({ wasRecovering: true, recovered: false });
      expect(seen).toEqual([{ n: 1 }]);
    } finally {
      await short.close();
      await new Promise((resolve) => shortServer.close(resolve));
    }
  });

  it('a subscription token for another user closes the connection; a bad signature is refused', async () => {
    const client = connect(await sign({ sub: 'u4' }));
    client.connect();
    const foreign = client.newSubscription('task_detail:t1/x', {
      getToken: () => sign({ sub: 'someone-else', channel: 'task_detail:t1/x' }),
    });
    const disconnected = next<{ code: number }>((resolve) => client.on('disconnected', resolve));
    foreign.subscribe();
    expect((await disconnected).code).toBe(3500);

    const forged = connect(
      await new SignJWT({ sub: 'u5' })
        .setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime('10m')
        .sign(new TextEncoder().encode('another-secret-entirely-of-some-length')),
    );
    const refused = next<{ code: number }>((resolve) => forged.on('disconnected', resolve));
    forged.connect();
    expect((await refused).code).toBe(3500);
  });

  it('an expired connection token makes the SDK fetch a new one and connect with it', async () => {
    let calls = 0;
    const client = connect(async () => {
      calls += 1;
      // The first token expired a minute ago; the next one is good.
      return calls === 1
        ? new SignJWT({ sub: 'u6' })
            .setProtectedHeader({ alg: 'HS256' })
            .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
            .sign(new TextEncoder().encode(secret))
        : sign({ sub: 'u6' });
    });
    const connected = next((resolve) => client.on('connected', resolve));
    client.connect();
    await connected;
    expect(calls).toBeGreaterThanOrEqual(2);
  });

  it('refuses a subscription past the per-connection limit of its namespace with error 106', async () => {
    const client = connect(await sign({ sub: 'u7' }));
    client.connect();
    const subscribe = async (channel: string) => {
      const sub = client.newSubscription(channel, { getToken: () => sign({ sub: 'u7', channel }) });
      const outcome = new Promise<{ subscribed?: boolean; code?: number }>((resolve) => {
        sub.once('subscribed', () => resolve({ subscribed: true }));
        sub.once('unsubscribed', (ctx) => resolve({ code: ctx.code }));
      });
      sub.subscribe();
      return outcome;
    };
    expect(await subscribe('task_detail:t1/a')).toEqual({ subscribed: true });
    expect(await subscribe('task_detail:t1/b')).toEqual({ subscribed: true });
    expect(await subscribe('task_detail:t1/c')).toEqual({ code: 106 });
    // Other namespaces are not counted.
    expect(await subscribe('task_user:t1/u7')).toEqual({ subscribed: true });
  });
});
