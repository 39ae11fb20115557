/**
 * Callback signatures. TDP signs every callback body with the application's callback secret:
 *
 *   TDP-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>
 *
 * During a secret rotation the header carries one `v1=` per valid secret. A receiver accepts the
 * callback when any `v1` matches and `t` is within its tolerance (TDP's demo app: 5 minutes).
 *
 * The MAC covers the body's bytes as sent: verify the raw bytes you received (a Buffer), not text decoded
 * and re-encoded, nor JSON parsed and serialised again.
 *
 * Test vector: secret "whsec_test", t = 1700000000, body '{"eventId":"e1"}'
 *   → v1=ead19a02fbe0bb6d0c7f3d25cef8280176aefaac9755cd99505dad3b267a6de9 (checked with openssl)
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const signatureHeader = 'TDP-Signature';

/** A body as text (signed as its UTF-8 bytes) or as the raw bytes received. */
export type SignedBody = string | Uint8Array;

export function computeSignature(secret: string, timestamp: number, body: SignedBody): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
}

export function signatureHeaderValue(secrets: string[], timestamp: number, body: SignedBody): string {
  return [`t=${timestamp}`, ...secrets.map((s) => `v1=${computeSignature(s, timestamp, body)}`)].join(',');
}

export type SignatureCheck = { ok: true } | { ok: false; reason: 'MALFORMED' | 'EXPIRED' | 'MISMATCH' };

/** Verifies a `TDP-Signature` header against one secret, within `toleranceSeconds` of `nowSeconds`. */
export function verifySignature(
  header: string | undefined,
  body: SignedBody,
  secret: string,
  nowSeconds: number,
  toleranceSeconds = 300,
): SignatureCheck {
  if (!header) return { ok: false, reason: 'MALFORMED' };
  const parts = header.split(',').map((p) => p.trim());
  const t = parts.find((p) => p.startsWith('t='))?.slice(2);
  const signatures = parts.filter((p) => p.startsWith('v1=')).map((p) => p.slice(3));
  if (!t || !/^\d+$/.test(t) || signatures.length === 0) return { ok: false, reason: 'MALFORMED' };
  const timestamp = Number(t);
  if (Math.abs(nowSeconds - timestamp) > toleranceSeconds) return { ok: false, reason: 'EXPIRED' };
  const expected = Buffer.from(computeSignature(secret, timestamp, body), 'hex');
  const match = signatures.some((s) => {
    const given = Buffer.from(s, 'hex');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  return match ? { ok: true } : { ok: false, reason: 'MISMATCH' };
}
