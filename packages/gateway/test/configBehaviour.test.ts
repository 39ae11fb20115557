/**
 * What a Centrifugo config's keys do once the gateway runs from it (`tdp gateway --config`), seen through
 * the SDK and raw requests: `client.allowed_origins` on the WebSocket handshake and the HTTP transports,
 * `channel.max_length`, `allow_history_for_subscriber` (and history off), and `health`.
 */
import { createServer, type Server } from 'node:http';
import { Centrifuge, type Subscription } from 'centrifuge';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Gateway, readCentrifugoConfig } from '../src/index.ts';

const secret = 'test-secret-of-enough-length-for-hs256';
let server: Server;
let gateway: Gateway;
let base: string;
const clients: Centrifuge[] = [];

beforeAll(async () => {
  const subscribable = { allow_subscribe_for_client: true, history_size: 10, history_ttl: '60s' };
  const { options } = readCentrifugoConfig({
    client: { token: { hmac_secret_key: secret }, allowed_origins: ['https://*.example.com'] },
    channel: {
      max_length: 20,
      namespaces: [
        { name: 'feed', ...subscribable, force_recovery: true, allow_history_for_subscriber: true },
        { name: 'quiet', ...subscribable },
        { name: 'bare', allow_subscribe_for_client: true, allow_history_for_subscriber: true },
      ],
    },
    health: { enabled: true },
  });
  gateway = new Gateway({ ...options, hmacKey: secret });
  server = createServer((request, response) => {
    if (!gateway.handleHttp(request, response)) response.writeHead(404).end();
  });
  gateway.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await gateway.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const token = () =>
  new SignJWT({ sub: 'u1' })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(secret));

/** An SDK client whose WebSocket handshake carries `origin` (as a browser page's would). */
async function connectFrom(origin: string | undefined) {
  class FromOrigin extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, origin ? { origin } : {});
    }
  }
  const client = new Centrifuge(`ws://${base}/connection/websocket`, {
    websocket: FromOrigin,
    token: await token(),
  });
  clients.push(client);
  const connected = new Promise((resolve) => client.once('connected', resolve));
  client.connect();
  await connected;
  return client;
}

/** The HTTP status of a raw WebSocket handshake from `origin`. */
const handshakeStatus = (origin: string) =>
  new Promise<number>((resolve) => {
    const socket = new WebSocket(`ws://${base}/connection/websocket`, { origin });
    socket.once('open', () => {
      resolve(101);
      socket.close();
    });
    socket.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
  });

const subscribed = async (client: Centrifuge, channel: string): Promise<Subscription> => {
  const sub = client.newSubscription(channel);
  const done = new Promise((resolve) => sub.once('subscribed', resolve));
  sub.subscribe();
  await done;
  return sub;
};

describe('a gateway run from a Centrifugo config', () => {
  it('refuses a WebSocket or stream from an origin allowed_origins does not list; lets others in', async () => {
    expect(await handshakeStatus('https://evil.example.org')).toBe(403);
    expect(await handshakeStatus('https://app.example.com')).toBe(101);
    // A pattern matches the whole origin, case aside.
    expect(await handshakeStatus('https://APP.example.com')).toBe(101);
    expect(await handshakeStatus('https://app.example.com.evil.org')).toBe(403);
    expect((await connectFrom('https://app.example.com')).state).toBe('connected');
    // No Origin: not a browser; it passes, as in Centrifugo.
    expect((await connectFrom(undefined)).state).toBe('connected');

    const connect = encodeURIComponent(JSON.stringify({ token: await token() }));
    for (const path of [`/connection/uni_sse?cf_connect=${connect}`, '/connection/sse']) {
      const refused = await fetch(`http://${base}${path}`, { headers: { origin: 'https://evil.org' } });
      expect({ path, status: refused.status }).toEqual({ path, status: 403 });
    }
    const emulation = await fetch(`http://${base}/emulation`, {
      method: 'POST',
      headers: { origin: 'https://evil.org' },
      body: JSON.stringify({ session: 's', node: 'n', data: '{}' }),
    });
    expect(emulation.status).toBe(403);
    const controller = new AbortController();
    const allowed = await fetch(`http://${base}/connection/uni_sse?cf_connect=${connect}`, {
      headers: { origin: 'https://app.example.com' },
      signal: controller.signal,
    });
    expect(allowed.status).toBe(200);
    // The CORS headers a page of that origin needs to read the stream.
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    expect(allowed.headers.get('access-control-allow-credentials')).toBe('true');
    controller.abort();
  });

  it('without allowed_origins (the gateway inside tdp server) checks no origin and sends no CORS headers', async () => {
    const open = new Gateway({ hmacKey: secret });
    const plain = createServer((request, response) => {
      if (!open.handleHttp(request, response)) response.writeHead(404).end();
    });
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    const controller = new AbortController();
    const connect = encodeURIComponent(JSON.stringify({ token: await token() }));
    const answer = await fetch(
      `http://127.0.0.1:${(plain.address() as { port: number }).port}/connection/uni_sse?cf_connect=${connect}`,
      { headers: { origin: 'https://anywhere.org' }, signal: controller.signal },
    );
    expect(answer.status).toBe(200);
    expect(answer.headers.get('access-control-allow-origin')).toBeNull();
    controller.abort();
    await open.close();
    plain.closeAllConnections();
    await new Promise((resolve) => plain.close(resolve));
  });

  it('answers a subscribe to a channel past channel.max_length with 107', async () => {
    const client = await connectFrom(undefined);
    const fits = 'feed:'.padEnd(20, 'x');
    expect((await subscribed(client, fits)).state).toBe('subscribed');
    const tooLong = client.newSubscription(`${fits}y`);
    const unsubscribed = new Promise<{ code: number }>((resolve) => tooLong.once('unsubscribed', resolve));
    tooLong.subscribe();
    expect((await unsubscribed).code).toBe(107);
    expect(client.state).toBe('connected');
  });

  it('lets a subscriber read history only where allow_history_for_subscriber is set, 108 without history', async () => {
    const client = await connectFrom(undefined);
    const feed = await subscribed(client, 'feed:news');
    await gateway.publish('feed:news', { n: 1 });
    const read = await feed.history({ limit: 10 });
    expect(read.publications.map((p) => p.data)).toEqual([{ n: 1 }]);
    const quiet = await subscribed(client, 'quiet:news');
    expect(await quiet.history({ limit: 10 }).catch((error: { code: number }) => error.code)).toBe(103);
    const bare = await subscribed(client, 'bare:news');
    expect(await bare.history({ limit: 10 }).catch((error: { code: number }) => error.code)).toBe(108);
  });

  it('answers GET /health with 200 {} (health.enabled)', async () => {
    const health = await fetch(`http://${base}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({});
  });
});
