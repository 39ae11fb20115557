/**
 * Bidirectional emulation with the official SDK: with WebSocket unavailable the SDK falls back to
 * `http_stream` or `sse` and sends its commands to `/emulation`; subscribe, publications, client
 * publish, presence and pings work over it as over a WebSocket.
 */
import { createServer, type Server } from 'node:http';
import { Centrifuge, type PublicationContext, type TransportEndpoint } from 'centrifuge';
import { EventSource } from 'eventsource';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Gateway } from '../src/index.ts';

const secret = 'test-secret-of-enough-length-for-hs256';
let server: Server;
let gateway: Gateway;
let base: string;
const clients: Centrifuge[] = [];
/** The commands each emulation request carried, as they came over the wire. */
const emulated: string[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    if (request.url === '/emulation') {
      // Watch what reaches /emulation on its way in (the gateway still reads every byte).
      request.on('data', (chunk: Buffer) => {
        emulated.push(chunk.toString());
      });
    }
    if (!gateway.handleHttp(request, response)) response.writeHead(404).end();
  });
  gateway = new Gateway({
    hmacKey: secret,
    pingIntervalMs: 1_000,
    channels: {
      withoutNamespace: {},
      namespaces: {
        chat: {
          allowSubscribeForClient: true,
          allowPublishForSubscriber: true,
          presence: true,
          allowPresenceForSubscriber: true,
        },
      },
    },
  });
  gateway.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await gateway.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const sign = (claims: Record<string, unknown>) =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(secret));

describe.each(['http_stream', 'sse'] as const)('the SDK over %s emulation', (transport) => {
  it('falls back from a WebSocket that fails, subscribes, publishes, asks presence and answers pings', async () => {
    const endpoints: TransportEndpoint[] = [
      // Nothing listens there: the SDK moves on to the emulation transport.
      { transport: 'websocket', endpoint: 'ws://127.0.0.1:1/connection/websocket' },
      { transport, endpoint: `${base}/connection/${transport}` },
    ];
    const client = new Centrifuge(endpoints, {
      token: await sign({ sub: `${transport}-user` }),
      emulationEndpoint: `${base}/emulation`,
      eventsource: EventSource,
      websocket: (await import('ws')).default,
      minReconnectDelay: 50,
      maxReconnectDelay: 200,
    });
    clients.push(client);
    const connected = new Promise<{ transport: string }>((resolve) => client.once('connected', resolve));
    client.connect();
    expect((await connected).transport).toBe(transport);

    const sub = client.newSubscription(`chat:${transport}`);
    const received: PublicationContext[] = [];
    sub.on('publication', (ctx) => received.push(ctx));
    const subscribed = new Promise((resolve) => sub.once('subscribed', resolve));
    sub.subscribe();
    await subscribed;
    await gateway.publish(`chat:${transport}`, { from: 'server' });
    await sub.publish({ from: 'client' });
    await expect.poll(() => received.map((p) => p.data)).toEqual([{ from: 'server' }, { from: 'client' }]);
    expect(await sub.presenceStats()).toEqual({ numClients: 1, numUsers: 1 });
    // Pings every second: the SDK answers each with a pong `{}` through /emulation.
    const pongs = () => emulated.filter((body) => JSON.parse(body).data === '{}').length;
    const before = pongs();
    await expect.poll(pongs, { timeout: 5_000 }).toBeGreaterThanOrEqual(before + 2);
    expect(client.state).toBe('connected');
    // A terminal close travels as a disconnect push before the stream ends.
    const disconnected = new Promise<{ code: number }>((resolve) => client.once('disconnected', resolve));
    client
      .newSubscription(`chat:${transport}-foreign`, {
        getToken: () => sign({ sub: 'someone-else', channel: `chat:${transport}-foreign` }),
      })
      .subscribe();
    expect((await disconnected).code).toBe(3500);
  });
});

describe('/emulation', () => {
  it('answers 404 for another node, 400 for a bad body, 413 past 64 KiB', async () => {
    const post = (body: string) => fetch(`${base}/emulation`, { method: 'POST', body }).then((r) => r.status);
    expect(await post(JSON.stringify({ session: 's', node: 'another-node', data: '{}' }))).toBe(404);
    expect(await post('not json')).toBe(400);
    expect(await post('x'.repeat(70 * 1024))).toBe(413);
  });
});
