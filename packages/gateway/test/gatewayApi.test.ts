/**
 * The gateway's server API, unidirectional SSE, JWKS tokens, connection expiry and pong timeouts —
 * against the real `centrifuge` SDK where a client is involved, and raw sockets where the SDK would hide
 * the behaviour (it always answers pings and refreshes its tokens).
 */
import { createServer, type Server } from 'node:http';
import { Centrifuge } from 'centrifuge';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Gateway, type GatewayOptions } from '../src/index.ts';

const secret = 'api-test-secret-of-enough-length-for-hs256';
const apiKey = 'test-api-key';
const sign = (claims: Record<string, unknown>, expiresIn: string | number = '10m') =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime(expiresIn)
    .sign(new TextEncoder().encode(secret));

const servers: Server[] = [];
const gateways: Gateway[] = [];
const clients: Centrifuge[] = [];

async function start(options: Partial<GatewayOptions> = {}) {
  const gateway = new Gateway({ hmacKey: secret, apiKey, ...options });
  const server = createServer((request, response) => {
    if (!gateway.handleHttp(request, response)) response.writeHead(404).end();
  });
  gateway.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  gateways.push(gateway);
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return { gateway, base, ws: `${base.replace('http', 'ws')}/connection/websocket` };
}

const api = async (base: string, method: string, body: unknown, key: string | null = apiKey) => {
  const response = await fetch(`${base}/api/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { 'x-api-key': key } : {}) },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (response.status === 200 ? await response.json() : null) as any };
};

function sdk(url: string, token: string) {
  const client = new Centrifuge(url, {
    websocket: WebSocket,
    token,
    minReconnectDelay: 50,
    maxReconnectDelay: 200,
  });
  clients.push(client);
  return client;
}

afterAll(async () => {
  for (const client of clients) client.disconnect();
  for (const gateway of gateways) await gateway.close();
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
});

describe('the server API', () => {
  let node: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    node = await start();
  });

  it('publish: the subscriber gets the publication at the offset the API answered; a repeated idempotency key publishes once', async () => {
    const channel = 'task_detail:t/api-1';
    const client = sdk(node.ws, await sign({ sub: 'u1' }));
    client.connect();
    const sub = client.newSubscription(channel, { getToken: () => sign({ sub: 'u1', channel }) });
    const seen: { data: unknown; offset: number }[] = [];
    sub.on('publication', (ctx) => seen.push({ data: ctx.data, offset: Number(ctx.offset) }));
    const subscribed = new Promise((resolve) => sub.once('subscribed', resolve));
    sub.subscribe();
    await subscribed;
    const first = await api(node.base, 'publish', { channel, data: { n: 1 }, idempotency_key: 'k1' });
    expect(first.status).toBe(200);
    expect(first.body.result).toMatchObject({ offset: 1, epoch: expect.any(String) });
    const again = await api(node.base, 'publish', { channel, data: { n: 1 }, idempotency_key: 'k1' });
    expect(again.body).toEqual(first.body);
    await api(node.base, 'publish', { channel, data: { n: 2 } });
    await expect.poll(() => seen.length).toBe(2);
    expect(seen).toEqual([
      { data: { n: 1 }, offset: 1 },
      { data: { n: 2 }, offset: 2 },
    ]);
  });

  it('refuses a missing or wrong key with a bare 401, bad JSON with 400, an unknown method with 404', async () => {
    expect((await api(node.base, 'publish', { channel: 'x', data: 1 }, null)).status).toBe(401);
    expect((await api(node.base, 'publish', { channel: 'x', data: 1 }, 'wrong')).status).toBe(401);
    const bad = await fetch(`${node.base}/api/publish`, {
      method: 'POST',
      headers: { 'x-api-key': apiKey },
      body: '{not json',
    });
    expect(bad.status).toBe(400);
    expect((await api(node.base, 'nonsense', {})).status).toBe(404);
    // Names every object has are not methods (they were looked up on the prototype: a 500).
    for (const name of ['toString', 'constructor', 'hasOwnProperty', '__proto__'])
      expect((await api(node.base, name, {})).status).toBe(404);
    expect((await api(node.base, 'batch', { commands: [{ toString: {} }] })).body).toEqual({
      replies: [{ error: { code: 104, message: 'method not found' } }],
    });
    expect((await api(node.base, 'publish', { channel: 'x' })).body).toEqual({
      error: { code: 107, message: 'bad request' },
    });
    // The other ways of giving the key.
    const byHeader = await fetch(`${node.base}/api/info`, {
      method: 'POST',
      headers: { authorization: `apikey ${apiKey}` },
      body: '{}',
    });
    expect(byHeader.status).toBe(200);
    expect(((await byHeader.json()) as any).result.nodes[0]).toMatchObject({ version: expect.any(String) });
  });

  it('history: no publications without a limit, all with -1, 112 for another epoch; broadcast answers per channel', async () => {
    const channel = 'task_detail:t/api-history';
    const answered = await api(node.base, 'broadcast', {
      channels: [channel, 'task_detail:t/other', ''],
      data: 'x',
    });
    expect(answered.body.result.responses).toEqual([
      { result: { offset: 1, epoch: expect.any(String) } },
      { result: { offset: 1, epoch: expect.any(String) } },
      { error: { code: 107, message: 'bad request' } },
    ]);
    await api(node.base, 'publish', { channel, data: 'y' });
    const positionOnly = await api(node.base, 'history', { channel });
    expect(positionOnly.body.result).toEqual({ offset: 2, epoch: expect.any(String) });
    const all = await api(node.base, 'history', { channel, limit: -1 });
    expect(all.body.result.publications).toEqual([
      { data: 'x', offset: 1 },
      { data: 'y', offset: 2 },
    ]);
    const stale = await api(node.base, 'history', {
      channel,
      limit: -1,
      since: { offset: 1, epoch: 'gone' },
    });
    expect(stale.body.error.code).toBe(112);
  });

  it('subscribe, unsubscribe and disconnect drive a live client', async () => {
    const channel = 'task_user:t/u9';
    const client = sdk(node.ws, await sign({ sub: 'u9' }));
    const connected = new Promise((resolve) => client.once('connected', resolve));
    client.connect();
    await connected;
    const serverSubscribed = new Promise<{ channel: string }>((resolve) =>
      client.once('subscribed', resolve),
    );
    expect((await api(node.base, 'subscribe', { user: 'u9', channel })).body).toEqual({ result: {} });
    expect((await serverSubscribed).channel).toBe(channel);
    const received = new Promise<{ data: unknown }>((resolve) => client.once('publication', resolve));
    await api(node.base, 'publish', { channel, data: { hello: 'u9' } });
    expect((await received).data).toEqual({ hello: 'u9' });
    const unsubscribed = new Promise<{ channel: string }>((resolve) => client.once('unsubscribed', resolve));
    await api(node.base, 'unsubscribe', { user: 'u9', channel });
    expect((await unsubscribed).channel).toBe(channel);
    const disconnected = new Promise<{ code: number }>((resolve) => client.once('disconnected', resolve));
    await api(node.base, 'disconnect', { user: 'u9' });
    expect((await disconnected).code).toBe(3503);
  });
});

describe('unidirectional SSE', () => {
  it('takes the connect request in cf_connect: a connect event first, then bare pushes and {} pings', async () => {
    const node = await start({ pingIntervalMs: 300 });
    const channel = 'task_user:t/uni';
    const token = await sign({ sub: 'uni', channels: [channel] });
    const controller = new AbortController();
    const response = await fetch(
      `${node.base}/connection/uni_sse?cf_connect=${encodeURIComponent(JSON.stringify({ token }))}`,
      { signal: controller.signal },
    );
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const reader = response.body!.getReader();
    const events: any[] = [];
    let text = '';
    const pump = (async () => {
      const decoder = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        text += decoder.decode(value, { stream: true });
        let end = text.indexOf('\n\n');
        while (end >= 0) {
          const block = text.slice(0, end).trim();
          text = text.slice(end + 2);
          if (block.startsWith('data: ')) events.push(JSON.parse(block.slice(6)));
          end = text.indexOf('\n\n');
        }
      }
    })().catch(() => {});
    await expect.poll(() => events.length).toBeGreaterThan(0);
    expect(events[0].connect).toMatchObject({
      client: expect.any(String),
      subs: { [channel]: expect.any(Object) },
    });
    expect(events[0].connect.pong).toBeUndefined();
    await node.gateway.publish(channel, { n: 1 });
    await expect
      .poll(() => events.find((e) => e.pub))
      .toEqual({ channel, pub: { data: { n: 1 }, offset: 1 } });
    await expect.poll(() => events.some((e) => Object.keys(e).length === 0), { timeout: 2_000 }).toBe(true);
    controller.abort();
    await pump;
  });

  it('an expired token ends the stream with a 3005 disconnect; bad cf_connect JSON is a 400', async () => {
    const node = await start();
    const token = await sign({ sub: 'late' }, Math.floor(Date.now() / 1000) - 10);
    const response = await fetch(
      `${node.base}/connection/uni_sse?cf_connect=${encodeURIComponent(JSON.stringify({ token }))}`,
    );
    const body = await response.text();
    expect(body).toContain('"disconnect":{"code":3005');
    expect((await fetch(`${node.base}/connection/uni_sse?cf_connect=%7Bbad`)).status).toBe(400);
  });
});

describe('tokens from a JWKS, expiry and pongs', () => {
  it('accepts RS256 and ES256 tokens signed by the JWKS keys, and refuses a key it does not publish', async () => {
    const rsa = await generateKeyPair('RS256');
    const ec = await generateKeyPair('ES256');
    const stranger = await generateKeyPair('RS256');
    const keys = [
      { ...(await exportJWK(rsa.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' },
      { ...(await exportJWK(ec.publicKey)), kid: 'ec-1', alg: 'ES256', use: 'sig' },
    ];
    const jwksServer = createServer((_request, response) =>
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys })),
    );
    await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
    servers.push(jwksServer);
    const node = await start({
      jwksUrl: `http://127.0.0.1:${(jwksServer.address() as { port: number }).port}/.well-known/jwks.json`,
    });
    const asymmetric = (
      claims: Record<string, unknown>,
      key: Parameters<SignJWT['sign']>[0],
      alg: string,
      kid: string,
    ) => new SignJWT(claims).setProtectedHeader({ alg, kid }).setExpirationTime('10m').sign(key);

    const client = sdk(node.ws, await asymmetric({ sub: 'k1' }, rsa.privateKey, 'RS256', 'rsa-1'));
    const connected = new Promise((resolve) => client.once('connected', resolve));
    client.connect();
    await connected;
    const channel = 'task_detail:t/jwks';
    const sub = client.newSubscription(channel, {
      getToken: () => asymmetric({ sub: 'k1', channel }, ec.privateKey, 'ES256', 'ec-1'),
    });
    const subscribed = new Promise((resolve) => sub.once('subscribed', resolve));
    sub.subscribe();
    await subscribed;

    const forged = sdk(node.ws, await asymmetric({ sub: 'k2' }, stranger.privateKey, 'RS256', 'rsa-1'));
    const refused = new Promise<{ code: number }>((resolve) => forged.once('disconnected', resolve));
    forged.connect();
    expect((await refused).code).toBe(3500);
  });

  it('closes a connection whose token expired unrefreshed with 3005, and one that does not answer pings with 3012', async () => {
    const node = await start({ expiredCloseDelayMs: 100, pingIntervalMs: 200, pongTimeoutMs: 300 });
    const closeOf = (socket: WebSocket) =>
      new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));

    const expiring = new WebSocket(node.ws);
    await new Promise((resolve) => expiring.once('open', resolve));
    // Answers pings, never refreshes.
    expiring.on('message', (data) => {
      if (data.toString() === '{}') expiring.send('{}');
    });
    expiring.send(
      JSON.stringify({
        id: 1,
        connect: { token: await sign({ sub: 'e1' }, Math.floor(Date.now() / 1000) + 1) },
      }),
    );
    expect(await closeOf(expiring)).toBe(3005);

    const silent = new WebSocket(node.ws);
    await new Promise((resolve) => silent.once('open', resolve));
    silent.send(JSON.stringify({ id: 1, connect: { token: await sign({ sub: 's1' }) } }));
    expect(await closeOf(silent)).toBe(3012);

    // The SDK answers pings: it stays connected across several.
    const client = sdk(node.ws, await sign({ sub: 'p1' }));
    const states: string[] = [];
    client.on('disconnected', () => states.push('disconnected'));
    const connected = new Promise((resolve) => client.once('connected', resolve));
    client.connect();
    await connected;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(states).toEqual([]);
  });

  it('closes a connection that never sends connect with 3502, and leaves one that did alone', async () => {
    const node = await start({ connectTimeoutMs: 200, pingIntervalMs: 100, pongTimeoutMs: 300 });
    const silent = new WebSocket(node.ws);
    const closed = new Promise<number>((resolve) => silent.once('close', (code) => resolve(code)));
    const connected = new WebSocket(node.ws);
    await new Promise((resolve) => connected.once('open', resolve));
    connected.on('message', (data) => {
      if (data.toString() === '{}') connected.send('{}');
    });
    connected.send(JSON.stringify({ id: 1, connect: { token: await sign({ sub: 'c1' }) } }));
    expect(await closed).toBe(3502);
    // Well past the connect timeout: still open.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(connected.readyState).toBe(WebSocket.OPEN);
    connected.close();
  });
});
