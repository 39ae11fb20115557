/**
 * Slow consumers (packages/gateway/README.md, "Slow clients"): a raw WebSocket client that stops reading
 * (its socket paused) gets the newest progress of each task and every other message, and is closed with
 * 3008 "slow" past its queue's bound, while a client reading the same channel gets everything,
 * undisturbed.
 */
import { createServer, get, type IncomingMessage, type Server } from 'node:http';
import { Centrifuge, type PublicationContext } from 'centrifuge';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { Gateway } from '../src/index.ts';
import { slowConsumerGateway, slowTestSecret } from './slowGateway.ts';

const secret = slowTestSecret;
const channel = 'task_user:t1/u1';
const pad = 'x'.repeat(8 * 1024);
let server: Server;
let gateway: Gateway;
let url: string;
let seen: ReturnType<typeof slowConsumerGateway>['seen'];

beforeAll(async () => {
  server = createServer();
  ({ gateway, seen } = slowConsumerGateway());
  gateway.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `ws://127.0.0.1:${(server.address() as { port: number }).port}/connection/websocket`;
});
afterAll(async () => {
  await gateway.close();
  await new Promise((resolve) => server.close(resolve));
});

interface Pub {
  offset: number;
  data: { taskId: string; kind: string; progress?: number; lifecycleStatus?: string };
}

/** A raw client following `channel` from its connection token; `pause` stops reading its socket. */
const connectionToken = () =>
  new SignJWT({ sub: 'u1', channels: [channel] })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(secret));

async function follow() {
  const token = await connectionToken();
  const socket = new WebSocket(url);
  const pubs: Pub[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  let connected!: () => void;
  const ready = new Promise<void>((resolve) => {
    connected = resolve;
  });
  socket.on('message', (raw) => {
    for (const line of raw.toString().split('\n')) {
      const message = JSON.parse(line);
      if (message.connect) connected();
      if (message.push?.pub) pubs.push(message.push.pub);
    }
  });
  await new Promise((resolve) => socket.once('open', resolve));
  socket.send(JSON.stringify({ id: 1, connect: { token } }));
  await ready;
  const raw = (socket as unknown as { _socket: { pause(): void; resume(): void } })._socket;
  return { socket, pubs, closed, pause: () => raw.pause(), resume: () => raw.resume() };
}

/** Lets the sockets write what was published. */
const turn = () => new Promise((resolve) => setTimeout(resolve, 1));

describe('a client that stops reading', () => {
  it('gets coalesced progress and every terminal and creation message; a reading client gets all', async () => {
    const slow = await follow();
    const fast = await follow();
    slow.pause();
    let progress = 0;
    const progressOf = (taskId: string) => ({ kind: 'task.summary', taskId, coalesceKey: taskId, pad });
    // Progress of task A until the slow client's queue is under pressure and its progress coalesces.
    while (seen.coalesced === 0 && progress < 5_000) {
      progress += 1;
      await gateway.publish(channel, { ...progressOf('A'), progress });
      await turn();
    }
    expect(seen.coalesced).toBeGreaterThan(0);
    await gateway.publish(channel, { kind: 'task.summary', taskId: 'B', created: true });
    for (let i = 0; i < 20; i += 1) {
      progress += 1;
      await gateway.publish(channel, { ...progressOf('A'), progress });
      await gateway.publish(channel, { ...progressOf('B'), progress });
    }
    await gateway.publish(channel, { kind: 'task.summary', taskId: 'A', lifecycleStatus: 'SUCCEEDED' });
    await gateway.publish(channel, { kind: 'task.summary', taskId: 'B', lifecycleStatus: 'FAILED' });
    const published = progress + 20 + 3;

    await expect.poll(() => fast.pubs.length, { timeout: 20_000 }).toBe(published);
    slow.resume();
    await expect.poll(() => slow.pubs.at(-1)?.data.lifecycleStatus, { timeout: 20_000 }).toBe('FAILED');
    const kinds = slow.pubs.filter((p) => p.data.progress === undefined).map((p) => p.data);
    expect(kinds).toMatchObject([
      { taskId: 'B', created: true },
      { taskId: 'A', lifecycleStatus: 'SUCCEEDED' },
      { taskId: 'B', lifecycleStatus: 'FAILED' },
    ]);
    expect(slow.pubs.length).toBeLessThan(published);
    // In offset order, each task's progress only moves forward, and the newest of each arrived.
    const offsets = slow.pubs.map((p) => p.offset);
    expect(offsets).toEqual([...offsets].sort((a, b) => a - b));
    for (const task of ['A', 'B']) {
      const steps = slow.pubs.filter((p) => p.data.taskId === task && p.data.progress !== undefined);
      expect(steps.at(-1)?.data.progress).toBe(progress);
    }
    expect(seen.slowDisconnects).toBe(0);
    slow.socket.close();
    fast.socket.close();
  });

  it('is closed with 3008 "slow" past its bound; the reading client stays connected and gets all', async () => {
    const slow = await follow();
    const fast = await follow();
    slow.pause();
    let sent = 0;
    // Messages that never coalesce (each a new task's creation) until the slow client is cut off.
    while (seen.slowDisconnects === 0 && sent < 5_000) {
      sent += 1;
      await gateway.publish(channel, { kind: 'task.summary', taskId: `new-${sent}`, pad });
      await turn();
    }
    expect(seen.slowDisconnects).toBe(1);
    await gateway.publish(channel, { kind: 'task.summary', taskId: 'after', lifecycleStatus: 'SUCCEEDED' });
    await expect.poll(() => fast.pubs.at(-1)?.data.taskId, { timeout: 20_000 }).toBe('after');
    expect(fast.pubs.length).toBe(sent + 1);
    slow.resume();
    expect(await slow.closed).toEqual({ code: 3008, reason: 'slow' });
    expect(slow.pubs.some((p) => p.data.taskId === 'after')).toBe(false);
    expect(fast.socket.readyState).toBe(WebSocket.OPEN);
    fast.socket.close();
  });

  it('with the centrifuge SDK: closed as slow, it reconnects by itself and recovers what it missed', async () => {
    const sockets: WebSocket[] = [];
    /** The SDK's WebSocket, kept at hand so that the test can stop reading it. */
    class Held extends WebSocket {
      constructor(address: string, protocols?: string | string[]) {
        super(address, protocols);
        sockets.push(this);
      }
    }
    const client = new Centrifuge(url, {
      websocket: Held,
      token: await connectionToken(),
      minReconnectDelay: 50,
      maxReconnectDelay: 200,
    });
    const disconnects: number[] = [];
    client.on('disconnected', (ctx) => disconnects.push(ctx.code));
    client.on('connecting', (ctx) => disconnects.push(ctx.code));
    const received: PublicationContext[] = [];
    client.on('publication', (ctx) => received.push(ctx));
    const subscribed = new Promise((resolve) => client.once('subscribed', resolve));
    client.connect();
    await subscribed;
    const before = seen.slowDisconnects;
    const raw = (sockets[0] as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    raw.pause();
    let sent = 0;
    while (seen.slowDisconnects === before && sent < 5_000) {
      sent += 1;
      await gateway.publish(channel, { kind: 'task.summary', taskId: `sdk-${sent}`, pad: 'y'.repeat(2048) });
      await turn();
    }
    expect(seen.slowDisconnects).toBe(before + 1);
    // Published while it was away: recovered from history once it is back.
    await gateway.publish(channel, { kind: 'task.summary', taskId: 'sdk-last', lifecycleStatus: 'FAILED' });
    raw.resume();
    await expect
      .poll(() => received.some((p) => (p.data as { taskId: string }).taskId === 'sdk-last'), {
        timeout: 20_000,
      })
      .toBe(true);
    expect(disconnects).toContain(3008);
    const names = received.map((p) => (p.data as { taskId: string }).taskId);
    expect(names.filter((n) => n.startsWith('sdk-'))).toHaveLength(sent + 1);
    expect(sockets.length).toBe(2);
    expect(client.state).toBe('connected');
    client.disconnect();
  });

  it('on uni SSE too: past its bound the stream ends with a 3008 "slow" disconnect', async () => {
    server.removeAllListeners('request');
    server.on('request', (request, response) => {
      if (!gateway.handleHttp(request, response)) response.writeHead(404).end();
    });
    const connect = encodeURIComponent(JSON.stringify({ token: await connectionToken() }));
    const response = await new Promise<IncomingMessage>((resolve) =>
      get(
        `${url.replace('ws://', 'http://').replace('/connection/websocket', '')}/connection/uni_sse?cf_connect=${connect}`,
        resolve,
      ),
    );
    let text = '';
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => {
      text += chunk;
    });
    await expect.poll(() => text.includes('"connect"')).toBe(true);
    response.pause();
    const before = seen.slowDisconnects;
    let sent = 0;
    while (seen.slowDisconnects === before && sent < 5_000) {
      sent += 1;
      await gateway.publish(channel, { kind: 'task.summary', taskId: `sse-${sent}`, pad });
      await turn();
    }
    expect(seen.slowDisconnects).toBe(before + 1);
    const ended = new Promise((resolve) => response.once('close', resolve));
    response.resume();
    await ended;
    expect(text.trimEnd().split('\n').at(-1)).toBe('data: {"disconnect":{"code":3008,"reason":"slow"}}');
  });
});
