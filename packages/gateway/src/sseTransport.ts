/**
 * The unidirectional SSE transport at `/connection/uni_sse`: the connect request comes in the URL (or a
 * POST body), then the stream carries the connect reply, pushes and pings; a refused connect ends it with
 * a disconnect event.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { JsonShapeError, parseCheckedJson } from '@tdp/protocol';
import type { Commands } from './commands.ts';
import type { Connections } from './connections.ts';
import { readBody, refuseJson, requestUrl, streamWire } from './http.ts';
import { type Close, closes } from './protocol.ts';

/** The largest connect request a POST may carry. */
const connectBodyLimit = 64 * 1024;

const event = (message: unknown) => `data: ${JSON.stringify(message)}\n\n`;

/** Pushes go bare; the connect reply goes as `{connect: ...}`; pings as `{}`. */
function encodeEvents(messages: unknown[]): string {
  let text = '';
  for (const m of messages as Record<string, unknown>[]) {
    if ('push' in m) text += event(m.push);
    else if ('connect' in m) text += event({ connect: m.connect });
    else if (Object.keys(m).length === 0) text += event({});
  }
  return text;
}

/** How a refused connect's reply error ends the stream (the SDK reconnects, or not, by the code). */
function closeForError(code: number): Close {
  if (code === 109 || code === 110) return closes.expired;
  if (code === 103) return closes.permissionDenied;
  return closes.internal;
}

export class SseTransport {
  constructor(
    private readonly connections: Connections,
    private readonly commands: Commands,
    private readonly jsonMaxDepth: number | undefined,
  ) {}

  async open(request: IncomingMessage, response: ServerResponse): Promise<void> {
    if (request.method !== 'GET' && request.method !== 'POST') {
      response.writeHead(405).end();
      return;
    }
    let connect: Record<string, unknown> = {};
    try {
      const text =
        request.method === 'POST'
          ? await readBody(request, connectBodyLimit)
          : (requestUrl(request).searchParams.get('cf_connect') ?? '');
      if (text === null) {
        response.writeHead(413).end();
        return;
      }
      if (text.trim() !== '') connect = parseCheckedJson(text, this.jsonMaxDepth) as Record<string, unknown>;
    } catch (error) {
      if (error instanceof JsonShapeError) refuseJson(response, error.fault);
      else response.writeHead(400).end();
      return;
    }
    response.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'private, no-cache, no-store, must-revalidate, max-age=0',
      'x-accel-buffering': 'no',
    });
    response.write('\r\n');
    const session = this.connections.open({
      pongs: false,
      encode: encodeEvents,
      ...streamWire(response),
      close: ([code, reason]) => {
        if (!response.writableEnded) response.end(event({ disconnect: { code, reason } }));
      },
    });
    response.on('close', () => session.end());
    const reply = await this.commands.handle(session, { id: 1, connect });
    if (reply === 'closed') return;
    const message = reply.message as { error?: { code: number } } | null;
    if (message?.error) {
      session.close(closeForError(message.error.code));
      return;
    }
    if (message) session.send([message]);
    reply.after?.();
  }
}
