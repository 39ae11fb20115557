/**
 * The demo's visitors. The demo has no accounts: each browser is one visitor, named by a random id in a
 * cookie the app signs (HMAC-SHA256 with a key made at setup), so nobody can claim another visitor's id.
 * A state change must come from the demo's own page: from its origin (Sec-Fetch-Site, or else Origin)
 * and with the visitor's CSRF token, which the page carries and another site can neither read nor send.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';

export const visitorCookie = 'demo_user';
export const csrfHeader = 'x-csrf-token';

const idPattern = /^[A-Za-z0-9_-]{1,64}$/;

const mac = (key: Buffer, purpose: string, visitor: string) =>
  createHmac('sha256', key).update(`${purpose}:${visitor}`).digest('base64url');

const same = (given: string, expected: string) => {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
};

export const newVisitorId = () => `visitor-${randomBytes(6).toString('hex')}`;

/** The cookie's value for a visitor: the id and its signature. */
export const signedVisitor = (key: Buffer, visitor: string) => `${visitor}.${mac(key, 'visitor', visitor)}`;

/** The visitor the request's cookie names, if its signature holds; null otherwise. */
export function visitorOf(key: Buffer, request: FastifyRequest): string | null {
  const cookie = request.headers.cookie ?? '';
  const value = new RegExp(`(?:^|;\\s*)${visitorCookie}=([^;]+)`).exec(cookie)?.[1] ?? '';
  const dot = value.lastIndexOf('.');
  const visitor = value.slice(0, dot);
  if (dot < 1 || !idPattern.test(visitor)) return null;
  return same(value.slice(dot + 1), mac(key, 'visitor', visitor)) ? visitor : null;
}

/** An Origin header's host and port (a TLS proxy in front makes the scheme differ from the request's). */
function hostOf(origin: string): string | null {
  try {
    return new URL(origin).host.toLowerCase();
  } catch {
    return null;
  }
}

export const csrfTokenOf = (key: Buffer, visitor: string) => mac(key, 'csrf', visitor);

/** Whether a state change may go ahead: from this origin (as far as the browser says), with the token. */
export function fromOwnPage(key: Buffer, request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  const origin = request.headers.origin;
  if (typeof site === 'string' && site !== 'same-origin') return false;
  if (origin !== undefined && hostOf(origin) !== request.host.toLowerCase()) return false;
  const visitor = visitorOf(key, request);
  const token = request.headers[csrfHeader];
  return visitor !== null && typeof token === 'string' && same(token, csrfTokenOf(key, visitor));
}
