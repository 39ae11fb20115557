import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  errorCatalogue,
  JsonShapeError,
  type JsonShapeFault,
  parseCheckedJson,
  problemType,
} from '@tdp/protocol';

/** The request's URL (its path and query; the host is irrelevant). */
export const requestUrl = (request: IncomingMessage): URL => new URL(request.url ?? '/', 'http://x');

/** The body as text, or null past `limit` bytes. */
export async function readBody(request: IncomingMessage, limit: number): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > limit) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** 400 for JSON past TDP's limits, as a problem naming its code (JSON_TOO_DEEP, …) like TDP's API. */
export function refuseJson(response: ServerResponse, fault: JsonShapeFault): void {
  const entry = errorCatalogue[fault.code];
  const body = {
    type: problemType(fault.code),
    title: entry.title,
    status: entry.status,
    code: fault.code,
    detail: fault.detail,
    retryable: entry.retryable,
  };
  response.writeHead(entry.status, { 'content-type': 'application/problem+json' }).end(JSON.stringify(body));
}

/**
 * A POST's JSON object body (an empty body is `{}`); null once it has answered a wrong method (405), a
 * body past `limit` (413), JSON past `maxDepth` or with an unpaired surrogate (400 problem, refuseJson)
 * or one that is not a JSON object (400).
 */
export async function readJsonPost(
  request: IncomingMessage,
  response: ServerResponse,
  limit: number,
  maxDepth: number | undefined,
): Promise<Record<string, unknown> | null> {
  if (request.method !== 'POST') {
    response.writeHead(405).end();
    return null;
  }
  const text = await readBody(request, limit);
  if (text === null) {
    response.writeHead(413).end();
    return null;
  }
  try {
    const body: unknown = text.trim() === '' ? {} : parseCheckedJson(text, maxDepth);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new Error('not an object');
    return body as Record<string, unknown>;
  } catch (error) {
    if (error instanceof JsonShapeError) refuseJson(response, error.fault);
    else response.writeHead(400).end();
    return null;
  }
}

/**
 * The streaming response of an SSE or HTTP-stream connection as its send queue's wire: writes go to the
 * socket at once, and `unsent` is what the client has not read yet. Node corks a response's socket until
 * the next tick after a write, so without writing through, the bytes of one busy tick (a burst of
 * publications) would count as unsent, and a client reading everything would look slow.
 */
export function streamWire(response: ServerResponse) {
  return {
    write(text: string, written: () => void): void {
      if (response.writableEnded) {
        written();
        return;
      }
      response.write(text, () => written());
      if (response.socket?.writableCorked) response.socket.uncork();
    },
    unsent: (): number => response.writableLength,
    cut: (): void => {
      response.destroy();
    },
  };
}
