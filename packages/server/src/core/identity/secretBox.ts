/**
 * Secrets at rest (callback signing secrets, resource-provider tokens) are sealed with AES-256-GCM.
 * The associated data binds a ciphertext to its owner and field, so a sealed value copied to another
 * row does not open. The key id in the envelope lets old ciphertexts open after the active key rotates.
 *
 * Envelope: `v1.<keyId>.<iv base64url>.<ciphertext+tag base64url>`
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export interface Keyring {
  activeKeyId: string;
  keys: ReadonlyMap<string, Buffer>;
}

/** Parses `kid1:base64key,kid2:base64key`; the first entry is the active key. */
export function parseKeyring(text: string): Keyring {
  const keys = new Map<string, Buffer>();
  let activeKeyId: string | undefined;
  for (const part of text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const separator = part.indexOf(':');
    if (separator <= 0) throw new Error('each secret key must look like <keyId>:<base64 of 32 bytes>');
    const keyId = part.slice(0, separator);
    if (!/^[A-Za-z0-9_-]{1,32}$/.test(keyId)) throw new Error(`invalid secret key id "${keyId}"`);
    const key = Buffer.from(part.slice(separator + 1), 'base64');
    if (key.length !== 32)
      throw new Error(`secret key "${keyId}" must be 32 bytes (base64), got ${key.length}`);
    keys.set(keyId, key);
    activeKeyId ??= keyId;
  }
  if (!activeKeyId) throw new Error('no secret key configured');
  return { activeKeyId, keys };
}

export function generateKeyringEntry(keyId: string): string {
  return `${keyId}:${randomBytes(32).toString('base64')}`;
}

export class SecretBox {
  constructor(private readonly keyring: Keyring) {}

  seal(plaintext: string, associatedData: string): string {
    const key = this.keyring.keys.get(this.keyring.activeKeyId)!;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.from(associatedData));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `v1.${this.keyring.activeKeyId}.${iv.toString('base64url')}.${body.toString('base64url')}`;
  }

  open(sealed: string, associatedData: string): string {
    const [version, keyId, ivText, bodyText] = sealed.split('.');
    if (version !== 'v1' || !keyId || !ivText || !bodyText) throw new Error('unrecognised sealed secret');
    const key = this.keyring.keys.get(keyId);
    if (!key) throw new Error(`sealed with unknown key id "${keyId}"`);
    const body = Buffer.from(bodyText, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(ivText, 'base64url'));
    decipher.setAAD(Buffer.from(associatedData));
    decipher.setAuthTag(body.subarray(body.length - 16));
    return Buffer.concat([decipher.update(body.subarray(0, body.length - 16)), decipher.final()]).toString(
      'utf8',
    );
  }
}
