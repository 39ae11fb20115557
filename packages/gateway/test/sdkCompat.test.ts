/**
 * The gateway as the official `centrifuge` SDK expects Centrifugo to behave: a token
 * without `sub`, connecting and subscribing without tokens where the options allow it, client publish,
 * presence and join/leave per namespace, and the protobuf subprotocol refused at the handshake. Codes
 * are Centrifugo's (centrifugal/centrifugo internal/client/handler.go, centrifuge client.go).
 */
import { createServer, type Server } from 'node:http';
import { Centrifuge, type JoinContext, type LeaveContext, type PublicationContext } from 'centrifuge';
import { SignJWT } from 'jose';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Gateway, type GatewayOptions } from '../src/index.ts';

const secret = 'test-secret-of-enough-length-for-hs256';
const running: { server: Server; gateway: Gateway }[] = [];
const clients: Centrifuge[] = [];

const sign = (claims: Record<string, unknown>) =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(secret));

async function start(options: Partial<GatewayOptions> = {}): Promise<{ url: string; gateway: Gateway }> {
  const server = createServer();
  const gateway = new Gateway({ hmacKey: secret, ...options });
  gateway.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  running.push({ server, gateway });
  const port = (server.address() as { port: number }).port;
  return { url: `ws://127.0.0.1:${port}/connection/websocket`, gateway };
}

afterAll(async () => {
  for (const client of clients) client.disconnect();
  for (const { server, gateway } of running) {
    await gateway.close();
    await new Promise((resolve) => server.close(resolve));
  }
});

function connect(url: string, token?: string) {
  const client = new Centrifuge(url, {
    websocket: WebSocket,
    ...(token ? { token } : {}),
    minReconnectDelay: 50,
    maxReconnectDelay: 200,
  });
  clients.push(client);
  client.connect();
  return client;
}

const next = <T>(register: (resolve: (value: T) => void) => void) =>
  new Promise<T>((resolve) => register(resolve));

/** Namespaces as `tdp gateway --config` maps them from a Centrifugo config. */
const channels: GatewayOptions['channels'] = {
  withoutNamespace: {},
  namespaces: {
    chat: {
      presence: true,
      joinLeave: true,
      allowSubscribeForClient: true,
      allowPublishForSubscriber: true,
      allowPresenceForSubscriber: true,
      historySize: 10,
      historyTtlMs: 60_000,
      forceRecovery: true,
    },
    open: { allowSubscribeForClient: true, allowSubscribeForAnonymous: true, allowPublishForClient: true },
    closed: {},
  },
};

describe('a token without sub (Centrifugo reads it as "")', () => {
  it('subscribes with a subscription token without sub on a connection without sub', async () => {
    const { url } = await start();
    const client = connect(url, await sign({}));
    const channel = 'task_detail:t/anonymous';
    const sub = client.newSubscription(channel, { getToken: () => sign({ channel }) });
    const disconnected = disconnectedCode(client);
    const subscribed = next((resolve) => sub.on('subscribed', resolve));
    sub.subscribe();
    await Promise.race([
      subscribed,
      disconnected.then((code) => Promise.reject(new Error(`closed ${code}`))),
    ]);
    expect(sub.state).toBe('subscribed');
  });
});

function disconnectedCode(client: Centrifuge): Promise<number> {
  return next<number>((resolve) => client.on('disconnected', (ctx) => resolve(ctx.code)));
}

describe('the protobuf subprotocol', () => {
  it('is refused at the WebSocket handshake (only JSON is spoken)', async () => {
    const { url } = await start();
    const socket = new WebSocket(url, ['centrifuge-protobuf']);
    const outcome = await new Promise<string>((resolve) => {
      socket.on('unexpected-response', (_request, response) => resolve(`refused ${response.statusCode}`));
      socket.on('open', () => resolve('opened'));
      socket.on('error', (error) => resolve(`error ${error.message}`));
    });
    socket.terminate();
    expect(outcome).toBe('refused 400');
  });
});

describe('connecting without a token', () => {
  it('is refused with 3501 unless anonymous connections are allowed', async () => {
    const { url } = await start();
    expect(await disconnectedCode(connect(url))).toBe(3501);
  });

  it('connects as the anonymous user with allow_anonymous_connect_without_token, and with insecure', async () => {
    for (const options of [{ allowAnonymousConnectWithoutToken: true }, { insecure: true }]) {
      const { url } = await start(options);
      const client = connect(url);
      const connected = next<{ client: string }>((resolve) => client.on('connected', resolve));
      expect((await connected).client).toBeTruthy();
    }
  });
});

describe('namespaces with Centrifugo options', () => {
  it('subscribes without a token where allow_subscribe_for_client, 103 where not, 102 for an unknown namespace', async () => {
    const { url } = await start({ channels, allowAnonymousConnectWithoutToken: true });
    const user = connect(url, await sign({ sub: 'u1' }));
    const chat = user.newSubscription('chat:room');
    const subscribed = next((resolve) => chat.on('subscribed', resolve));
    chat.subscribe();
    await subscribed;

    const outcome = (channel: string, client: Centrifuge) => {
      const sub = client.newSubscription(channel);
      const result = next<number>((resolve) => {
        sub.on('unsubscribed', (ctx) => resolve(ctx.code));
        sub.on('subscribed', () => resolve(0));
      });
      sub.subscribe();
      return result;
    };
    expect(await outcome('closed:room', user)).toBe(103);
    expect(await outcome('nowhere:room', user)).toBe(102);
    // allow_subscribe_for_client is for users with an id; anonymous ones need _for_anonymous.
    const anonymous = connect(url);
    expect(await outcome('chat:room', anonymous)).toBe(103);
    expect(await outcome('open:room', anonymous)).toBe(0);
  });

  it('publishes from the client where the namespace allows it (103 otherwise)', async () => {
    const { url } = await start({ channels });
    const alice = connect(url, await sign({ sub: 'alice' }));
    const bob = connect(url, await sign({ sub: 'bob' }));
    const aliceChat = alice.newSubscription('chat:publish');
    const bobChat = bob.newSubscription('chat:publish');
    const received = next<PublicationContext>((resolve) => bobChat.on('publication', resolve));
    await Promise.all(
      [aliceChat, bobChat].map((sub) => {
        const subscribed = next((resolve) => sub.on('subscribed', resolve));
        sub.subscribe();
        return subscribed;
      }),
    );
    await aliceChat.publish({ text: 'hello' });
    expect((await received).data).toEqual({ text: 'hello' });
    // allow_publish_for_subscriber: not subscribed, not allowed.
    await expect(bob.publish('chat:elsewhere', { text: 'x' })).rejects.toMatchObject({ code: 103 });
    await expect(bob.publish('closed:room', { text: 'x' })).rejects.toMatchObject({ code: 103 });
    await expect(bob.publish('open:room', { text: 'y' })).resolves.toBeDefined();
  });

  it('answers presence and presence stats where the namespace keeps presence (108 where not)', async () => {
    const { url } = await start({ channels });
    const subscribe = async (user: string, channel: string) => {
      const client = connect(url, await sign({ sub: user, info: { name: user } }));
      const sub = client.newSubscription(channel);
      const subscribed = next((resolve) => sub.on('subscribed', resolve));
      sub.subscribe();
      await subscribed;
      return { client, sub };
    };
    const alice = await subscribe('alice', 'chat:presence');
    await subscribe('bob', 'chat:presence');
    await subscribe('bob', 'chat:presence');
    const presence = await alice.sub.presence();
    expect(
      Object.values(presence.clients)
        .map((c) => c.user)
        .sort(),
    ).toEqual(['alice', 'bob', 'bob']);
    expect(Object.values(presence.clients).find((c) => c.user === 'alice')).toMatchObject({
      connInfo: { name: 'alice' },
    });
    expect(await alice.sub.presenceStats()).toEqual({ numClients: 3, numUsers: 2 });
    const open = await subscribe('carol', 'open:presence');
    await expect(open.sub.presence()).rejects.toMatchObject({ code: 108 });
    // allow_presence_for_subscriber: a client not subscribed to the channel may not ask.
    await expect(open.client.presence('chat:presence')).rejects.toMatchObject({ code: 103 });
  });

  it('sends join and leave to subscriptions that asked for them, where the namespace has join_leave', async () => {
    const { url } = await start({ channels });
    const watcher = connect(url, await sign({ sub: 'watcher' }));
    const watching = watcher.newSubscription('chat:joins', { joinLeave: true });
    const joins: JoinContext[] = [];
    const leaves: LeaveContext[] = [];
    watching.on('join', (ctx) => joins.push(ctx));
    watching.on('leave', (ctx) => leaves.push(ctx));
    const subscribed = next((resolve) => watching.on('subscribed', resolve));
    watching.subscribe();
    await subscribed;

    const guest = connect(url, await sign({ sub: 'guest' }));
    const visit = guest.newSubscription('chat:joins');
    const visiting = next((resolve) => visit.on('subscribed', resolve));
    visit.subscribe();
    await visiting;
    await expect.poll(() => joins.map((j) => j.info.user)).toContain('guest');
    visit.unsubscribe();
    await expect.poll(() => leaves.map((l) => l.info.user)).toEqual(['guest']);
  });

  it('recovers only where force_recovery is set', async () => {
    const { url, gateway } = await start({ channels });
    const client = connect(url, await sign({ sub: 'u1' }));
    const recoverable = client.newSubscription('chat:positions');
    const plain = client.newSubscription('open:positions');
    await gateway.publish('chat:positions', { n: 1 });
    const positions = await Promise.all(
      [recoverable, plain].map((sub) => {
        const subscribed = next<{ recoverable: boolean; positioned: boolean }>((resolve) =>
          sub.on('subscribed', resolve),
        );
        sub.subscribe();
        return subscribed;
      }),
    );
    expect(positions.map((p) => [p.recoverable, p.positioned])).toEqual([
      [true, true],
      [false, false],
    ]);
  });
});

describe('pings faster than a second', () => {
  it('are advertised as 1 s, since the SDK answers none when told 0', async () => {
    const { url } = await start({ pingIntervalMs: 300 });
    const socket = new WebSocket(url);
    await new Promise((resolve) => socket.once('open', resolve));
    const reply = new Promise<string>((resolve) => socket.once('message', (raw) => resolve(raw.toString())));
    socket.send(JSON.stringify({ id: 1, connect: { token: await sign({ sub: 'u1' }) } }));
    const connect = (JSON.parse(await reply) as { connect: { ping: number; pong: boolean } }).connect;
    socket.terminate();
    expect(connect).toMatchObject({ ping: 1, pong: true });
  });
});
