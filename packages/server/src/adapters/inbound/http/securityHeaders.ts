/**
 * The headers every answer of the HTTP server carries (through @fastify/helmet): a strict Content Security
 * Policy (scripts and styles from this origin only, never inline; no plugins; no framing: the dashboard's
 * buttons cannot be clickjacked), `nosniff`, no referrer, a window of its own (COOP). The dashboard and
 * the API docs are served from files, so the policy needs no nonce. HSTS is left to whoever terminates
 * TLS: the server cannot tell whether every name it is reached by has HTTPS.
 */
import type { FastifyHelmetOptions } from '@fastify/helmet';

/** The policy's directives; `connect` adds the origins a page's scripts may reach beyond this one. */
export function contentSecurityPolicy(connect: string[] = []) {
  return {
    useDefaults: false,
    directives: {
      defaultSrc: ["'self'"],
      scriptSrc: ["'self'"],
      scriptSrcAttr: ["'none'"],
      styleSrc: ["'self'"],
      imgSrc: ["'self'", 'data:'],
      fontSrc: ["'self'", 'data:'],
      // 'self' covers the same host's ws:/wss: (CSP level 3), the gateway's default endpoint.
      connectSrc: ["'self'", ...connect],
      objectSrc: ["'none'"],
      baseUri: ["'none'"],
      formAction: ["'self'"],
      frameAncestors: ["'none'"],
    },
  };
}

export function securityHeaders(connect: string[] = []): FastifyHelmetOptions {
  return {
    contentSecurityPolicy: contentSecurityPolicy(connect),
    xFrameOptions: { action: 'deny' },
    referrerPolicy: { policy: 'no-referrer' },
    crossOriginOpenerPolicy: { policy: 'same-origin' },
    // Browsers may load the API's answers only from pages of its own origin (CORS requests aside).
    crossOriginResourcePolicy: { policy: 'same-origin' },
    strictTransportSecurity: false,
  };
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
