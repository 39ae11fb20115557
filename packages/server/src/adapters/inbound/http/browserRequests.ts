/**
 * What the server asks of a browser that acts with a cookie: the request must come from a page of this
 * origin (Sec-Fetch-Site, or else Origin, when the browser sends them) and carry the session's CSRF token
 * in a header, which a form or a `text/plain` POST from another site cannot set. A cookie is marked
 * `Secure` when the request came over TLS, as `request.protocol` says: X-Forwarded-Proto counts only
 * from a proxy `TDP_TRUST_PROXY` trusts.
 */
import type { FastifyRequest } from 'fastify';
import { AppError } from '../../../core/shared/errors.ts';

export const csrfHeader = 'x-csrf-token';

/** Whether the request can change state: anything but a read. */
export const changesState = (request: FastifyRequest) => !['GET', 'HEAD', 'OPTIONS'].includes(request.method);

/**
 * Refuses a request a browser sent from another origin. Browsers send Sec-Fetch-Site (recent ones) or
 * Origin (all, on a POST), whose host must be the request's; a request with neither is not a browser's,
 * and the CSRF token still guards it.
 */
export function refuseCrossSite(request: FastifyRequest): void {
  const site = request.headers['sec-fetch-site'];
  if (typeof site === 'string') {
    if (site === 'same-origin') return;
    throw csrfRejected();
  }
  const origin = request.headers.origin;
  if (origin === undefined) return;
  if (hostOf(origin) !== request.host.toLowerCase()) throw csrfRejected();
}

/**
 * The host (and port) of an Origin header; the scheme is left out so that a TLS proxy nobody told the
 * server to trust (its requests arrive as http) does not turn every change away.
 */
function hostOf(origin: string): string | null {
  try {
    return new URL(origin).host.toLowerCase();
  } catch {
    return null;
  }
}

/** The CSRF token the request carries in its header, or ''. */
export function csrfTokenOf(request: FastifyRequest): string {
  const given = request.headers[csrfHeader];
  return typeof given === 'string' ? given : '';
}

export function csrfRejected(): AppError {
  return new AppError(
    'CSRF_REJECTED',
    'this request must come from the page itself, with its CSRF token; reload the page and try again',
  );
}

/** The value of cookie `name` in the request, or null. */
export function cookieOf(request: FastifyRequest, name: string): string | null {
  for (const pair of (request.headers.cookie ?? '').split(';')) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === name) return pair.slice(at + 1).trim() || null;
  }
  return null;
}

/** Whether the request came over TLS (directly, or through a trusted proxy that says so). */
export const overTls = (request: FastifyRequest) => request.protocol === 'https';

/**
 * Where a page connects for live status: the configured URL, else this server's own gateway, wss:// for
 * a request that came over TLS (a browser refuses ws:// from an https page).
 */
export const realtimeUrlOf = (request: FastifyRequest, configured: string | null | undefined) =>
  configured ?? `${overTls(request) ? 'wss' : 'ws'}://${request.host}/connection/websocket`;
