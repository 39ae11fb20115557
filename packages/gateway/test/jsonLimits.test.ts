/**
 * Clients' JSON past TDP's limits (@tdp/protocol jsonLimits.ts) is a bad request on every way into the
 * gateway: a WebSocket command nested 4,000 levels, or with an unpaired surrogate in a value or a key,
 * closes that connection with 3501 and a reason naming the code, publishes nothing, and the gateway
 * keeps serving everyone else; the HTTP endpoints (emulation, uni_sse connect, server API) answer 400
 * with the code. A well-formed surrogate pair still goes through.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Gateway } from '../src/index.ts';

const apiKey = 'api-key-of-the-json-limits-test';
let server: Server;
let gateway: Gateway;
let base: string;
const sockets: WebSocket[] = [];

/** `{"a":{"a":…1…}}`, `levels` objects deep, as JSON text. */
const deepText = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
const hostile = [
  { name: 'nested 4,000 levels', json: deepText(4000), code: 'JSON_TOO_DEEP' },
  { name: 'an unpaired surrogate in a value', json: '{"x":"\\ud800"}', code: 'JSON_UNPAIRED_SURROGATE' },
  { name: 'an unpaired surrogate in a key', json: '{"\\udc00":1}', code: 'JSON_UNPAIRED_SURROGATE' },
] as const;

beforeAll(async () => {
  server = createServer((request, response) => {
    if (!gateway.handleHttp(request, response)) response.writeHead(404).end();
  });
  // Insecure: anyone connects, subscribes and publishes, so a client's data reaches other clients.
  gateway = new Gateway({ hmacKey: 'unused-secret-of-enough-length', insecure: true, apiKey });
  gateway.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  for (const socket of sockets) socket.terminate();
  await gateway.close();
  await new Promise((resolve) => server.close(resolve));
});

/** What the channel's history holds. */
const stored = async (channel: string) => {
  const read = await gateway.engine.read(channel, { limit: -1 });
  return read.ok ? read.publications.map((p) => p.data) : null;
};

/** A connected WebSocket client: what it received, and how its connection closed. */
async function client() {
  const socket = new WebSocket(`ws://${base}/connection/websocket`);
  sockets.push(socket);
  const received: any[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  socket.on('message', (data) => {
    for (const line of data.toString().split('\n')) if (line) received.push(JSON.parse(line));
  });
  await new Promise((resolve) => socket.on('open', resolve));
  const reply = async (id: number) => {
    await expect.poll(() => received.some((m) => m.id === id)).toBe(true);
    return received.find((m) => m.id === id);
  };
  socket.send('{"id":1,"connect":{}}');
  expect((await reply(1)).connect).toBeDefined();
  return { socket, received, closed, reply };
}

describe('WebSocket commands', () => {
  it('a publish with bad JSON closes its connection with 3501 and the code, and reaches no one', async () => {
    const listener = await client();
    listener.socket.send('{"id":2,"subscribe":{"channel":"chat"}}');
    await listener.reply(2);
    for (const { name, json, code } of hostile) {
      const sender = await client();
      sender.socket.send(`{"id":2,"publish":{"channel":"chat","data":${json}}}`);
      expect(await sender.closed, name).toEqual({ code: 3501, reason: `bad request: ${code}` });
    }
    // The gateway still serves: a new client publishes a well-formed pair, and the listener gets only it.
    const sender = await client();
    sender.socket.send('{"id":2,"publish":{"channel":"chat","data":{"x":"\\ud83d\\ude00"}}}');
    expect((await sender.reply(2)).publish).toEqual({});
    await expect.poll(() => listener.received.filter((m) => m.push).length).toBe(1);
    expect(listener.received.find((m) => m.push).push.pub.data).toEqual({ x: '\ud83d\ude00' });
    expect(await stored('chat')).toEqual([{ x: '\ud83d\ude00' }]);
  });

  it('a connect command with bad JSON is refused the same way', async () => {
    for (const { name, json, code } of hostile) {
      const socket = new WebSocket(`ws://${base}/connection/websocket`);
      sockets.push(socket);
      const closed = new Promise<{ code: number; reason: string }>((resolve) =>
        socket.on('close', (closeCode, reason) => resolve({ code: closeCode, reason: reason.toString() })),
      );
      await new Promise((resolve) => socket.on('open', resolve));
      socket.send(`{"id":1,"connect":{"data":${json}}}`);
      expect(await closed, name).toEqual({ code: 3501, reason: `bad request: ${code}` });
    }
  });
});

describe('HTTP endpoints', () => {
  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`http://${base}${path}`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', ...headers },
    });

  it('the server API, /emulation and the uni_sse connect answer 400 with the code; nothing is published', async () => {
    for (const { name, json, code } of hostile) {
      const answers = [
        await post('/api/publish', `{"channel":"api","data":${json}}`, { 'x-api-key': apiKey }),
        await post('/emulation', `{"session":"s","node":"n","data":"","extra":${json}}`),
        await post('/connection/uni_sse', `{"data":${json}}`),
      ];
      for (const answer of answers) {
        expect(answer.status, name).toBe(400);
        expect(answer.headers.get('content-type'), name).toBe('application/problem+json');
        expect(await answer.json(), name).toMatchObject({ code, status: 400, retryable: false });
      }
    }
    expect(await stored('api')).toEqual([]);
    const published = await post('/api/publish', '{"channel":"api","data":{"x":"\\ud83d\\ude00"}}', {
      'x-api-key': apiKey,
    });
    expect(published.status).toBe(200);
    expect(await stored('api')).toEqual([{ x: '\ud83d\ude00' }]);
  });
});
