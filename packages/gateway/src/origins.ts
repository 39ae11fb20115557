/**
 * Centrifugo's `client.allowed_origins` (centrifugo internal/app/origin.go): a request with an `Origin`
 * header must match one of the patterns (glob: `*` any characters, `?` one), compared in lower case; one
 * without `Origin` is not a browser's and passes; an empty list lets only those pass. Without the
 * option there is no check (the gateway inside `tdp server`, same origin as its pages).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface OriginCheck {
  (origin: string | undefined): boolean;
  /** Origins are listed: an allowed cross-origin request gets CORS headers (never for any origin at all). */
  listed: boolean;
}

const globToRegExp = (pattern: string): RegExp =>
  new RegExp(
    `^${pattern
      .split('')
      .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[\\^$.|+()[\]{}]/g, '\\$&')))
      .join('')}$`,
  );

export function originCheck(allowed: string[] | undefined): OriginCheck {
  if (allowed === undefined) return Object.assign(() => true, { listed: false });
  const patterns = allowed.map(globToRegExp);
  return Object.assign(
    (origin: string | undefined) =>
      origin === undefined || patterns.some((p) => p.test(origin.toLowerCase())),
    { listed: true },
  );
}

/**
 * A cross-origin request that passed a listed check gets the CORS headers Centrifugo sets (so a browser
 * page of an allowed origin may read the SSE and HTTP streams and post to /emulation); without a list no
 * CORS headers at all (echoing any origin with credentials would open the streams to every site). True
 * when the request may go on, false when it was answered 403.
 */
export function admitHttp(check: OriginCheck, request: IncomingMessage, response: ServerResponse): boolean {
  const origin = request.headers.origin;
  if (!check(origin)) {
    response.writeHead(403).end();
    return false;
  }
  if (origin !== undefined && check.listed) {
    response.setHeader('access-control-allow-origin', origin);
    response.setHeader('access-control-allow-credentials', 'true');
    const asked = request.headers['access-control-request-headers'];
    if (asked && asked !== 'null') response.setHeader('access-control-allow-headers', asked);
  }
  return true;
}
