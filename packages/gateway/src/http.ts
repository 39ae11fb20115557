import type { IncomingMessage } from 'node:http';

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
