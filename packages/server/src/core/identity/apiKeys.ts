/**
 * API keys look like `tdp_<keyId>_<secret>`. The key id is public and finds the row; only the SHA-256
 * of the secret is stored. The secret carries 256 random bits, so a fast hash is enough (there is
 * nothing to brute-force), and the comparison is constant-time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const keyPattern = (prefix: string) => new RegExp(`^${prefix}_([A-Za-z0-9]{16})_([A-Za-z0-9_-]{43})$`);
const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

export interface GeneratedApiKey {
  keyId: string;
  /** The full key, shown to its owner once. */
  plaintext: string;
  secretHash: Buffer;
}

function randomKeyId(): string {
  const bytes = randomBytes(16);
  let id = '';
  for (const byte of bytes) id += alphabet[byte % alphabet.length];
  return id;
}

export function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}

/** `prefix` tells key kinds apart: `tdp` for applications, `tdpw` for workers. */
export function generateApiKey(prefix = 'tdp'): GeneratedApiKey {
  const keyId = randomKeyId();
  const secret = randomBytes(32).toString('base64url');
  return { keyId, plaintext: `${prefix}_${keyId}_${secret}`, secretHash: hashSecret(secret) };
}

export function parseApiKey(plaintext: string, prefix = 'tdp'): { keyId: string; secret: string } | null {
  const match = keyPattern(prefix).exec(plaintext);
  if (!match) return null;
  return { keyId: match[1]!, secret: match[2]! };
}

export function secretMatches(secret: string, storedHash: Buffer): boolean {
  const candidate = hashSecret(secret);
  return candidate.length === storedHash.length && timingSafeEqual(candidate, storedHash);
}

/** Compares two tokens without leaking where they differ (hashing first equalises the lengths). */
export function tokensEqual(given: string, expected: string): boolean {
  return timingSafeEqual(hashSecret(given), hashSecret(expected));
}

/** A key is usable until it is revoked or its rotation overlap has run out. */
export function keyIsUsable(key: { revokedAt: Date | null; expiresAt: Date | null }, now: Date): boolean {
  if (key.revokedAt && key.revokedAt <= now) return false;
  if (key.expiresAt && key.expiresAt <= now) return false;
  return true;
}
