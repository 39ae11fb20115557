/**
 * A process of realtime clients for `bench -- realtime`. Told over IPC which connections to open:
 *
 * - `tdp`: the `centrifuge` SDK with a connection token (the user's channel is a server-side
 *   subscription); latency from the summary's `updatedAt` (its fact's time, taken as its transaction
 *   starts) to its arrival, and each arrival's time by task and version (the bench joins them to the
 *   commit times PostgreSQL recorded).
 * - `socketio`: socket.io-client joining the user's room; latency from the message's `sentAt`.
 *   A connection marked `slow` records nothing, and stops reading its socket (a frozen tab) while the
 *   process is told to `pause` them, until it is told to `resume`.
 * - `tdp-idle` / `socketio-idle`: connections that only stay open (raw WebSocket with a connect command
 *   for TDP), for the memory measurement.
 *
 * Reports `ready` once every connection is subscribed, and its latencies and count when asked.
 */
import { Centrifuge } from 'centrifuge';
import { io, type Socket } from 'socket.io-client';
import WebSocket from 'ws';

type Mode = 'tdp' | 'socketio' | 'tdp-idle' | 'socketio-idle';
interface Start {
  type: 'start';
  mode: Mode;
  url: string;
  connections: { user: string; token?: string; slow?: boolean }[];
}

let latencies: number[] = [];
/** `taskId:taskVersion` and the wall-clock time of its arrival, in ms with a fraction. */
let arrivals: [string, number][] = [];
let received = 0;
const open: { close(): void }[] = [];
/** The sockets of the slow connections (their current one: the SDK opens a new one on a reconnect). */
const slowSockets: (() => WebSocket | null)[] = [];
let slowPaused = false;
type RawSocket = { _socket?: { pause(): void; resume(): void } };

function record(sentAt: number) {
  received += 1;
  latencies.push(Date.now() - sentAt);
}

/**
 * A raw WebSocket that connects and answers pings. A connection reset before the connect reply (the
 * server's listen backlog overflows when a loaded machine accepts slowly) is tried again a few times.
 */
function openIdle(url: string, token: string, connection: { close(): void }, attempt = 1): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    connection.close = () => socket.close();
    let connected = false;
    socket.on('error', (error) => {
      if (connected) return;
      if (attempt >= 5) reject(error);
      else
        setTimeout(() => openIdle(url, token, connection, attempt + 1).then(resolve, reject), 100 * attempt);
    });
    socket.once('open', () => socket.send(JSON.stringify({ id: 1, connect: { token } })));
    socket.on('message', (data) => {
      const text = data.toString();
      if (text === '{}') socket.send('{}');
      else if (text.includes('"connect"')) {
        connected = true;
        resolve();
      }
    });
  });
}

async function start(message: Start) {
  const ready: Promise<void>[] = [];
  for (const { user, token, slow } of message.connections) {
    if (message.mode === 'tdp') {
      let socket: WebSocket | null = null;
      /** The SDK's socket, kept so that a slow connection can stop reading it. */
      class Kept extends WebSocket {
        constructor(address: string, protocols?: string | string[]) {
          super(address, protocols);
          socket = this;
          // A reconnect while paused stays paused.
          if (slow && slowPaused) this.once('open', () => (this as unknown as RawSocket)._socket?.pause());
        }
      }
      if (slow) slowSockets.push(() => socket);
      const client = new Centrifuge(message.url, { websocket: Kept, token: token! });
      if (!slow)
        client.on('publication', (ctx) => {
          const summary = ctx.data as { taskId: string; taskVersion: string; updatedAt: string };
          arrivals.push([
            `${summary.taskId}:${summary.taskVersion}`,
            performance.timeOrigin + performance.now(),
          ]);
          record(Date.parse(summary.updatedAt));
        });
      ready.push(new Promise((resolve) => client.once('subscribed', () => resolve())));
      client.connect();
      open.push({ close: () => client.disconnect() });
    } else if (message.mode === 'socketio' || message.mode === 'socketio-idle') {
      const socket: Socket = io(message.url, { transports: ['websocket'], reconnection: false });
      if (message.mode === 'socketio') socket.on('state', (data: { sentAt: number }) => record(data.sentAt));
      ready.push(
        new Promise((resolve, reject) => {
          socket.on('connect', () => socket.emit('join', user, () => resolve()));
          // Without reconnection a refused or reset connect would leave this connection pending forever.
          let attempts = 1;
          socket.on('connect_error', (error) => {
            if (attempts >= 5) reject(error);
            else setTimeout(() => socket.connect(), 100 * attempts++);
          });
        }),
      );
      open.push({ close: () => socket.close() });
    } else {
      const connection = { close: () => {} };
      ready.push(openIdle(message.url, token!, connection));
      open.push(connection);
    }
    // Connecting thousands at once overflows the listen backlog; a small pause between them does not.
    if (open.length % 100 === 0) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await Promise.all(ready);
  process.send?.({ type: 'ready' });
}

process.on('message', (message: Start | { type: 'report' | 'stop' | 'pause' | 'resume' }) => {
  if (message.type === 'pause' || message.type === 'resume') {
    slowPaused = message.type === 'pause';
    for (const socket of slowSockets) {
      const raw = (socket() as unknown as RawSocket | null)?._socket;
      if (slowPaused) raw?.pause();
      else raw?.resume();
    }
    process.send?.({ type: message.type });
  } else if (message.type === 'start')
    void start(message).catch((error) => process.send?.({ type: 'error', error: String(error) }));
  else if (message.type === 'report') {
    process.send?.({ type: 'report', latencies, arrivals, received });
    latencies = [];
    arrivals = [];
    received = 0;
  } else {
    for (const connection of open) connection.close();
    setTimeout(() => process.exit(0), 200);
  }
});
