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
 *
 * Every callback also carries the Standard Webhooks headers (https://www.standardwebhooks.com), so a
 * receiver can verify it with a library it already has; `TDP-Signature` stays for a deprecation period.
 *
 *   webhook-id: <the delivery's id, the same on every retry>
 *   webhook-timestamp: <unix seconds of this attempt>
 *   webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>." + body)> (one per valid secret)
 *
 * The key is what `new Webhook(secret)` of the `standardwebhooks` package makes of the callback secret
 * (the bytes of the base64 after `whsec_`; every secret issued now has that form). A secret it refuses
 * (older secrets were base64url) signs with its UTF-8 bytes, and `standardWebhookSecret` gives the
 * equivalent `whsec_` value to hand to a Standard Webhooks verifier.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

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

/** The Standard Webhooks headers (lowercase, as Node gives headers). */
export const standardWebhookHeaders = {
  id: 'webhook-id',
  timestamp: 'webhook-timestamp',
  signature: 'webhook-signature',
} as const;

/** The secret to hand to a Standard Webhooks verifier (`new Webhook(...)`) for a TDP callback secret. */
export function standardWebhookSecret(secret: string): string {
  return readAsIs(secret) ? secret : olderSecretAsStandard(secret);
}

const olderSecretAsStandard = (secret: string) => `whsec_${Buffer.from(secret, 'utf8').toString('base64')}`;

/** The library's own signer of a secret it reads, or null for an older secret it refuses. */
function readAsIs(secret: string): Webhook | null {
  try {
    return new Webhook(secret);
  } catch {
    return null;
  }
}

// The signer of a callback secret: built once per call, from the secret as it is whenever the library reads it.
function signerOf(secret: string): Webhook {
  return readAsIs(secret) ?? new Webhook(olderSecretAsStandard(secret));
}

/** The `webhook-signature` value: one `v1,<base64>` per secret, separated by spaces. */
export function standardWebhookSignature(
  id: string,
  secrets: string[],
  timestamp: number,
  body: SignedBody,
): string {
  return secrets.map((s) => signerOf(s).sign(id, new Date(timestamp * 1000), body)).join(' ');
}

/** The three Standard Webhooks headers of one delivery attempt. */
export function standardWebhookHeaderValues(
  id: string,
  secrets: string[],
  timestamp: number,
  body: SignedBody,
): Record<string, string> {
  return {
    [standardWebhookHeaders.id]: id,
    [standardWebhookHeaders.timestamp]: String(timestamp),
    [standardWebhookHeaders.signature]: standardWebhookSignature(id, secrets, timestamp, body),
  };
}

/**
 * Verifies the Standard Webhooks headers against one secret, within `toleranceSeconds` of `nowSeconds`
 * (what `Webhook.verify` does, with the receiver's clock and tolerance and a reason when it refuses).
 */
export function verifyStandardWebhook(
  headers: { id: string | undefined; timestamp: string | undefined; signature: string | undefined },
  body: SignedBody,
  secret: string,
  nowSeconds: number,
  toleranceSeconds = 300,
): SignatureCheck {
  const { id, timestamp, signature } = headers;
  if (!id || !timestamp || !/^\d+$/.test(timestamp) || !signature) return { ok: false, reason: 'MALFORMED' };
  const t = Number(timestamp);
  if (Math.abs(nowSeconds - t) > toleranceSeconds) return { ok: false, reason: 'EXPIRED' };
  const expected = Buffer.from(standardWebhookSignature(id, [secret], t, body));
  const match = signature.split(' ').some((s) => {
    const given = Buffer.from(s);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  return match ? { ok: true } : { ok: false, reason: 'MISMATCH' };
}
