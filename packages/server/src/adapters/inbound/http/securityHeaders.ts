/**
 * The headers every answer of the HTTP server carries: a strict Content Security Policy (scripts and
 * styles from this origin only, never inline; no plugins; no framing: the dashboard's buttons cannot be
 * clickjacked), `nosniff`, no referrer, a window of its own (COOP), and answers readable by pages of this
 * origin only (CORP). The dashboard and the API docs are served from files, so the policy needs no nonce.
 * HSTS is left to whoever terminates TLS: the server cannot tell whether every name it is reached by has
 * HTTPS.
 *
 * They are one fixed set of strings, computed once and set by a single hook: every API answer carries
 * them, and a middleware that builds them per request (helmet) cost some 40 µs of CPU on each.
 */
import type { FastifyInstance } from 'fastify';

/** The policy; `connect` adds the origins a page's scripts may reach beyond this one. */
export function contentSecurityPolicy(connect: string[] = []): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    "script-src-attr 'none'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    // 'self' covers the same host's ws:/wss: (CSP level 3), the gateway's default endpoint.
    ["connect-src 'self'", ...connect].join(' '),
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join(';');
}

export function securityHeaders(connect: string[] = []): Record<string, string> {
  return {
    'content-security-policy': contentSecurityPolicy(connect),
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'cross-origin-opener-policy': 'same-origin',
    // Browsers may load the API's answers only from pages of its own origin (CORS requests aside).
    'cross-origin-resource-policy': 'same-origin',
  };
}

/** Sets `headers` on every answer of `app` (and of the plugins in it), before any handler runs. */
export function sendSecurityHeaders(app: FastifyInstance, headers: Record<string, string>): void {
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(headers);
    done();
  });
}

/** A policy that also lets the page's own scripts add <style> elements (still no inline script). */
export const allowInlineStyles = (policy: string) =>
  policy.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'");

/** The origin (`scheme://host:port`) of a URL, for a policy's source list; null when it does not parse. */
export function originOf(url: string): string | null {
  try {
    const { protocol, host } = new URL(url);
    return `${protocol}//${host}`;
  } catch {
    return null;
  }
}
