/**
 * Bidirectional emulation (docs/design/realtime-wire-compatibility.md), for clients without WebSocket:
 * the SDK's `sse` (`GET /connection/sse?cf_connect=<connect command>`, replies as `data: <reply>` events)
 * and `http_stream` (`POST /connection/http_stream` with the connect command, replies one per line) open
 * a stream of replies and pushes; every later command (pongs too) comes as `POST /emulation` with
 * `{session, node, data}` and is answered 204, its replies going down the stream.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Commands } from './commands.ts';
import type { Connections } from './connections.ts';
import { readBody, readJsonPost, requestUrl, streamWire } from './http.ts';
import { closes } from './protocol.ts';
import type { Session } from './session.ts';

/** The largest connect command or emulation request accepted (413 past it). */
const bodyLimit = 64 * 1024;

type Framing = 'sse' | 'http_stream';

interface Stream {
  session: Session;
  /** Commands of one stream are handled in order, across emulation requests. */
  queue: Promise<void>;
}

export class EmulationTransport {
  /** This process, as the SDK's `node`: a request for another node answers 404 (the SDK reconnects). */
  private readonly node = randomUUID();
  private readonly streams = new Map<string, Stream>();

  constructor(
    private readonly connections: Connections,
    private readonly commands: Commands,
    private readonly jsonMaxDepth: number | undefined,
  ) {}

  /** `/connection/sse` (GET) or `/connection/http_stream` (POST): opens a stream with its connect. */
  async open(framing: Framing, request: IncomingMessage, response: ServerResponse): Promise<void> {
    if (request.method === 'OPTIONS') {
      response.writeHead(204).end();
      return;
    }
    if (request.method !== (framing === 'sse' ? 'GET' : 'POST')) {
      response.writeHead(405).end();
      return;
    }
    const text =
      framing === 'sse'
        ? (requestUrl(request).searchParams.get('cf_connect') ?? '')
        : await readBody(request, bodyLimit);
    if (text === null) {
      response.writeHead(413).end();
      return;
    }
    const id = randomUUID();
    const frame = (message: unknown) =>
      framing === 'sse' ? `data: ${JSON.stringify(message)}\n\n` : `${JSON.stringify(message)}\n`;
    response.writeHead(200, {
      'content-type': framing === 'sse' ? 'text/event-stream; charset=utf-8' : 'application/json',
      'cache-control': 'private, no-cache, no-store, must-revalidate, max-age=0',
      'x-accel-buffering': 'no',
    });
    if (framing === 'sse') response.write('\r\n');
    const session = this.connections.open({
      pongs: true,
      encode: (messages) =>
        messages
          .map((m) => {
            // The connect reply names the stream and this node, for the SDK's emulation requests.
            const reply = m as { connect?: object };
            return frame(
              reply.connect ? { ...reply, connect: { ...reply.connect, session: id, node: this.node } } : m,
            );
          })
          .join(''),
      ...streamWire(response),
      close: ([code, reason]) => {
        if (!response.writableEnded) response.end(frame({ push: { disconnect: { code, reason } } }));
      },
    });
    const stream: Stream = { session, queue: Promise.resolve() };
    this.streams.set(id, stream);
    response.on('close', () => {
      this.streams.delete(id);
      session.end();
    });
    this.enqueue(stream, text);
  }

  /** `POST /emulation`: commands for a stream of this node, answered 204; their replies go down it. */
  async receive(request: IncomingMessage, response: ServerResponse): Promise<void> {
    if (request.method === 'OPTIONS') {
      response.writeHead(204).end();
      return;
    }
    const body = await readJsonPost(request, response, bodyLimit, this.jsonMaxDepth);
    if (!body) return;
    if (typeof body.session !== 'string' || typeof body.data !== 'string') {
      response.writeHead(400).end();
      return;
    }
    if (body.node !== this.node) {
      response.writeHead(404).end();
      return;
    }
    const stream = this.streams.get(body.session);
    // A stream that already ended: nothing to do (its client reconnects on its own).
    if (stream) this.enqueue(stream, body.data);
    response.writeHead(204).end();
  }

  private enqueue(stream: Stream, frame: string): void {
    stream.queue = stream.queue
      .then(() => this.commands.onFrame(stream.session, frame))
      .catch(() => stream.session.close(closes.badRequest));
  }
}
