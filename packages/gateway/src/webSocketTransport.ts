/** The bidirectional transport: WebSocket upgrades on a path, JSON frames of `\n`-separated commands. */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { type WebSocket, WebSocketServer } from 'ws';
import type { Commands } from './commands.ts';
import type { Connections } from './connections.ts';
import { requestUrl } from './http.ts';
import type { OriginCheck } from './origins.ts';
import { closes } from './protocol.ts';

/** The subprotocol of Centrifugo's protobuf client protocol (the SDK's `protocol: 'protobuf'`). */
const protobufSubprotocol = 'centrifuge-protobuf';

const offersProtobuf = (request: IncomingMessage): boolean =>
  (request.headers['sec-websocket-protocol'] ?? '')
    .split(',')
    .some((offered) => offered.trim() === protobufSubprotocol);

export class WebSocketTransport {
  private readonly sockets = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });

  constructor(
    private readonly connections: Connections,
    private readonly commands: Commands,
    private readonly originAllowed: OriginCheck,
  ) {}

  /** Serves the WebSocket endpoint on `server` at `path`. */
  attach(server: Server, path: string): void {
    server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      if (requestUrl(request).pathname !== path) return;
      if (!this.originAllowed(request.headers.origin)) {
        // Centrifugo's allowed_origins: refused at the handshake, as its upgrader does.
        socket.once('finish', () => socket.destroy());
        socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
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
    const session = this.connections.open({
      pongs: true,
      // Several messages in one frame, `\n`-separated.
      encode: (messages) => messages.map((m) => JSON.stringify(m)).join('\n'),
      write: (text, written) => {
        if (socket.readyState === socket.OPEN) socket.send(text, written);
        else written();
      },
      close: ([code, reason]) => socket.close(code, reason),
      unsent: () => socket.bufferedAmount,
      cut: () => socket.terminate(),
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
