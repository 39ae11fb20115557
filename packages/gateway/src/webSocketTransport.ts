/** The bidirectional transport: WebSocket upgrades on a path, JSON frames of `\n`-separated commands. */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { type WebSocket, WebSocketServer } from 'ws';
import type { Commands } from './commands.ts';
import type { Connections } from './connections.ts';
import { requestUrl } from './http.ts';
import type { GatewayOptions } from './options.ts';
import { closes } from './protocol.ts';
import { SendQueue } from './sendQueue.ts';

/** The subprotocol of Centrifugo's protobuf client protocol (the SDK's `protocol: 'protobuf'`). */
const protobufSubprotocol = 'centrifuge-protobuf';

const offersProtobuf = (request: IncomingMessage): boolean =>
  (request.headers['sec-websocket-protocol'] ?? '')
    .split(',')
    .some((offered) => offered.trim() === protobufSubprotocol);

/** Centrifugo's defaults: a 1 MiB client queue, a 1 s write timeout. */
export const defaultClientQueue = { pressureBytes: 64 * 1024, maxBytes: 1024 * 1024, closeGraceMs: 1_000 };

export class WebSocketTransport {
  private readonly sockets = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });

  constructor(
    private readonly connections: Connections,
    private readonly commands: Commands,
    private readonly options: Pick<GatewayOptions, 'clientQueue' | 'observer'>,
  ) {}

  /** Serves the WebSocket endpoint on `server` at `path`. */
  attach(server: Server, path: string): void {
    server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      if (requestUrl(request).pathname !== path) return;
      if (offersProtobuf(request)) {
        // Only the JSON protocol is spoken: refused before the upgrade, so the SDK's protobuf client
        // fails at once instead of after a connect that could never work.
        socket.once('finish', () => socket.destroy());
        socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      this.sockets.handleUpgrade(request, socket, head, (ws) => this.open(ws));
    });
  }

  close(): Promise<void> {
    return new Promise<void>((resolve) => this.sockets.close(() => resolve()));
  }

  private open(socket: WebSocket): void {
    const limits = this.options.clientQueue ?? defaultClientQueue;
    const queue = new SendQueue(
      {
        buffered: () => socket.bufferedAmount,
        write: (text, written) => socket.send(text, written),
      },
      (messages) => messages.map((m) => JSON.stringify(m)).join('\n'),
      limits,
      () => session.close(closes.slow),
      this.options.observer,
    );
    const session = this.connections.open({
      pongs: true,
      send: (messages) => {
        if (socket.readyState === socket.OPEN) queue.send(messages);
      },
      close: ([code, reason]) => {
        socket.close(code, reason);
        // A client that does not read will not read the close either: cut it, as Centrifugo's write
        // timeout does, so its buffers are freed.
        if (code === closes.slow[0]) setTimeout(() => socket.terminate(), limits.closeGraceMs).unref();
      },
    });
    let commandsDone = Promise.resolve();
    socket.on('message', (raw) => {
      // Commands of one connection are handled in order (a subscribe waits for its connect).
      commandsDone = commandsDone
        .then(() => this.commands.onFrame(session, raw.toString()))
        .catch(() => session.close(closes.badRequest));
    });
    socket.on('close', () => {
      session.end();
    });
  }
}
