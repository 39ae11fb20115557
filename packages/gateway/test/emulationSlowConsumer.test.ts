/**
 * Slow consumers on the bidirectional emulation (packages/gateway/README.md, "Slow clients"), with the
 * official SDK over `http_stream` and `sse`: a client whose stream stops being read gets the newest
 * progress of each task and every other message, and past its queue's bound is disconnected with 3008
 * "slow", reconnects and recovers, while a client reading the same channel over the same transport gets
 * everything.
 */
import { createServer, type Server } from 'node:http';
import { Centrifuge, type PublicationContext } from 'centrifuge';
import { EventSource } from 'eventsource';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../src/index.ts';
import { slowConsumerGateway, slowTestSecret } from './slowGateway.ts';

const secret = slowTestSecret;
const pad = 'x'.repeat(8 * 1024);
let server: Server;
let gateway: Gateway;
let base: string;
let seen: ReturnType<typeof slowConsumerGateway>['seen'];
const clients: Centrifuge[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    if (!gateway.handleHttp(request, response)) response.writeHead(404).end();
  });
  ({ gateway, seen } = slowConsumerGateway());
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

interface TaskMessage {
  taskId: string;
  progress?: number;
  created?: boolean;
  lifecycleStatus?: string;
}

/**
 * A fetch whose stream responses (`/connection/...`) stop being read while paused: nothing is pulled
 * from the socket, so the gateway's writes back up as they do for a client that stopped reading.
 */
function pausableFetch() {
  let paused = false;
  let wake: (() => void) | null = null;
  const pausable = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const response = await fetch(input, init);
    if (!String(input).includes('/connection/') || !response.body) return response;
    const reader = response.body.getReader();
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          while (paused) await new Promise<void>((resolve) => (wake = resolve));
          const { done, value } = await reader.read();
          if (done) controller.close();
          else controller.enqueue(value);
        },
        cancel: (reason) => reader.cancel(reason),
      },
      { highWaterMark: 0 },
    );
    return new Response(body, { status: response.status, headers: response.headers });
  };
  return {
    fetch: pausable,
    pause: () => {
      paused = true;
    },
    resume: () => {
      paused = false;
      wake?.();
    },
  };
}

const tokenFor = (channel: string) =>
  new SignJWT({ sub: 'u1', channels: [channel] })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(secret));

/** An SDK client over `transport` following `channel` from its token (a server-side subscription). */
async function follow(transport: 'http_stream' | 'sse', channel: string) {
  const wire = pausableFetch();
  /** The SDK's EventSource, reading through the pausable fetch. */
  class PausableEventSource extends EventSource {
    constructor(url: string | URL, init?: ConstructorParameters<typeof EventSource>[1]) {
      super(url, { ...init, fetch: wire.fetch });
    }
  }
  const client = new Centrifuge([{ transport, endpoint: `${base}/connection/${transport}` }], {
    token: await tokenFor(channel),
    emulationEndpoint: `${base}/emulation`,
    fetch: wire.fetch,
    eventsource: PausableEventSource,
    minReconnectDelay: 50,
    maxReconnectDelay: 200,
  });
  clients.push(client);
  const received: TaskMessage[] = [];
  client.on('publication', (ctx: PublicationContext) => received.push(ctx.data as TaskMessage));
  const codes: number[] = [];
  client.on('connecting', (ctx) => codes.push(ctx.code));
  const subscribed = new Promise((resolve) => client.once('subscribed', resolve));
  client.connect();
  await subscribed;
  return { client, received, codes, pause: wire.pause, resume: wire.resume };
}

/** Lets the streams write what was published. */
const turn = () => new Promise((resolve) => setTimeout(resolve, 1));

describe.each(['http_stream', 'sse'] as const)('a slow client over %s emulation', (transport) => {
  it('gets coalesced progress and every creation and terminal message; a reading client gets all', async () => {
    const channel = `task_user:t1/coalesce-${transport}`;
    const slow = await follow(transport, channel);
    const fast = await follow(transport, channel);
    slow.pause();
    const coalescedBefore = seen.coalesced;
    const slowBefore = seen.slowDisconnects;
    let progress = 0;
    const progressOf = (taskId: string) => ({ taskId, coalesceKey: taskId, pad, progress });
    while (seen.coalesced === coalescedBefore && progress < 5_000) {
      progress += 1;
      await gateway.publish(channel, progressOf('A'));
      await turn();
    }
    expect(seen.coalesced).toBeGreaterThan(coalescedBefore);
    await gateway.publish(channel, { taskId: 'B', created: true });
    for (let i = 0; i < 20; i += 1) {
      progress += 1;
      await gateway.publish(channel, progressOf('A'));
      await gateway.publish(channel, progressOf('B'));
    }
    await gateway.publish(channel, { taskId: 'A', lifecycleStatus: 'SUCCEEDED' });
    await gateway.publish(channel, { taskId: 'B', lifecycleStatus: 'FAILED' });
    const published = progress + 20 + 3;

    await expect.poll(() => fast.received.length, { timeout: 20_000 }).toBe(published);
    slow.resume();
    await expect.poll(() => slow.received.at(-1)?.lifecycleStatus, { timeout: 20_000 }).toBe('FAILED');
    expect(slow.received.filter((m) => m.progress === undefined)).toMatchObject([
      { taskId: 'B', created: true },
      { taskId: 'A', lifecycleStatus: 'SUCCEEDED' },
      { taskId: 'B', lifecycleStatus: 'FAILED' },
    ]);
    expect(slow.received.length).toBeLessThan(published);
    for (const task of ['A', 'B']) {
      const steps = slow.received.filter((m) => m.taskId === task && m.progress !== undefined);
      // Each task's progress only moves forward, and its newest arrived.
      expect(steps.map((m) => m.progress)).toEqual(steps.map((m) => m.progress).sort((a, b) => a! - b!));
      expect(steps.at(-1)?.progress).toBe(progress);
    }
    expect(seen.slowDisconnects).toBe(slowBefore);
    expect(slow.client.state).toBe('connected');
    expect(fast.codes).toEqual([0]);
  });

  it('is disconnected with 3008 "slow" past its bound, reconnects and recovers; the reader is untouched', async () => {
    const channel = `task_user:t1/bound-${transport}`;
    const slow = await follow(transport, channel);
    const fast = await follow(transport, channel);
    slow.pause();
    const before = seen.slowDisconnects;
    let sent = 0;
    // Messages that never coalesce (each a new task's creation) until the slow client is cut off.
    while (seen.slowDisconnects === before && sent < 5_000) {
      sent += 1;
      await gateway.publish(channel, { taskId: `new-${sent}`, created: true, pad });
      await turn();
    }
    expect(seen.slowDisconnects).toBe(before + 1);
    await gateway.publish(channel, { taskId: 'after', lifecycleStatus: 'SUCCEEDED' });
    await expect.poll(() => fast.received.at(-1)?.taskId, { timeout: 20_000 }).toBe('after');
    expect(fast.received).toHaveLength(sent + 1);
    slow.resume();
    // Read up to the disconnect, reconnected, and what was published meanwhile recovered from history.
    await expect.poll(() => slow.received.at(-1)?.taskId, { timeout: 20_000 }).toBe('after');
    expect(slow.codes).toContain(3008);
    expect(new Set(slow.received.map((m) => m.taskId)).size).toBe(sent + 1);
    expect(slow.client.state).toBe('connected');
    expect(fast.codes).toEqual([0]);
    expect(fast.client.state).toBe('connected');
  });
});
