import { describe, expect, it } from 'vitest';
import { generateApiKey, keyIsUsable, parseApiKey, secretMatches } from '../src/core/identity/apiKeys.ts';
import { checkOutboundUrl } from '../src/core/identity/outboundUrl.ts';
import { generateKeyringEntry, parseKeyring, SecretBox } from '../src/core/identity/secretBox.ts';
import { reachedApplications, withinReach } from '../src/core/identity/userReach.ts';

describe('API keys', () => {
  it('round-trips a generated key and stores only a hash of its secret', () => {
    const key = generateApiKey();
    const parsed = parseApiKey(key.plaintext);
    expect(parsed?.keyId).toBe(key.keyId);
    expect(secretMatches(parsed!.secret, key.secretHash)).toBe(true);
    expect(key.secretHash.toString('hex')).not.toContain(parsed!.secret);
    expect(secretMatches(`${parsed!.secret.slice(0, -1)}x`, key.secretHash)).toBe(false);
  });

  it('rejects malformed keys', () => {
    expect(parseApiKey('tdp_short_x')).toBeNull();
    expect(parseApiKey('')).toBeNull();
    expect(parseApiKey(`${generateApiKey().plaintext}x`)).toBeNull();
  });

  it('stops accepting a key when it expires or is revoked', () => {
    const now = new Date('2026-01-01T00:00:00Z');
    expect(keyIsUsable({ revokedAt: null, expiresAt: null }, now)).toBe(true);
    expect(keyIsUsable({ revokedAt: null, expiresAt: new Date(now.getTime() + 1) }, now)).toBe(true);
    expect(keyIsUsable({ revokedAt: null, expiresAt: now }, now)).toBe(false);
    expect(keyIsUsable({ revokedAt: now, expiresAt: null }, now)).toBe(false);
  });
});

describe('secret box', () => {
  it('seals with AES-256-GCM bound to its owner, and opens with older keys after rotation', () => {
    const oldEntry = generateKeyringEntry('k1');
    const box = new SecretBox(parseKeyring(oldEntry));
    const sealed = box.seal('whsec_abc', 'application:1:callback_secret');
    expect(sealed).toMatch(/^v1\.k1\./);
    expect(sealed).not.toContain('whsec_abc');
    expect(box.open(sealed, 'application:1:callback_secret')).toBe('whsec_abc');
    expect(() => box.open(sealed, 'application:2:callback_secret')).toThrow();

    const rotated = new SecretBox(parseKeyring(`${generateKeyringEntry('k2')},${oldEntry}`));
    expect(rotated.open(sealed, 'application:1:callback_secret')).toBe('whsec_abc');
    expect(rotated.seal('x', 'a')).toMatch(/^v1\.k2\./);
    expect(() =>
      new SecretBox(parseKeyring(generateKeyringEntry('k3'))).open(sealed, 'application:1:callback_secret'),
    ).toThrow(/unknown key id "k1"/);
  });

  it('refuses a tampered ciphertext', () => {
    const box = new SecretBox(parseKeyring(generateKeyringEntry('k1')));
    const sealed = box.seal('secret', 'aad');
    const parts = sealed.split('.');
    const body = Buffer.from(parts[3]!, 'base64url');
    body[0] = body[0]! ^ 1;
    expect(() => box.open([...parts.slice(0, 3), body.toString('base64url')].join('.'), 'aad')).toThrow();
  });

  it('validates keyring configuration', () => {
    expect(() => parseKeyring('')).toThrow(/no secret key/);
    expect(() => parseKeyring('k1:c2hvcnQ=')).toThrow(/32 bytes/);
    expect(() => parseKeyring('nocolon')).toThrow(/keyId/);
  });
});

describe('outbound URLs', () => {
  it('requires https without credentials unless insecure URLs are allowed', () => {
    expect(checkOutboundUrl('https://app.example/callback', false)).toBeNull();
    expect(checkOutboundUrl('http://app.example/callback', false)).toBe('must use https');
    expect(checkOutboundUrl('http://localhost:3000/cb', true)).toBeNull();
    expect(checkOutboundUrl('https://user:pw@app.example/cb', false)).toBe('must not contain credentials');
    expect(checkOutboundUrl('ftp://app.example/cb', true)).toBe('must use http or https');
    expect(checkOutboundUrl('not a url', false)).toBe('is not an absolute URL');
  });
});

describe('the user reach (one isolation rule)', () => {
  const own = { tenantId: 't1', applicationId: 'a', userView: 'APPLICATION' as const };
  const wide = { ...own, userView: 'TENANT' as const };

  it("reaches the application's own tasks by default, every application's of the tenant when named, never another tenant's", () => {
    const cases = [
      [own, { tenantId: 't1', applicationId: 'a' }, true],
      [own, { tenantId: 't1', applicationId: 'b' }, false],
      [own, { tenantId: 't2', applicationId: 'a' }, false],
      [wide, { tenantId: 't1', applicationId: 'b' }, true],
      [wide, { tenantId: 't2', applicationId: 'c' }, false],
      [wide, { tenantId: 't2', applicationId: 'a' }, false],
    ] as const;
    for (const [reach, task, expected] of cases) expect(withinReach(reach, task)).toBe(expected);
  });

  it('names the applications whose channels a token carries', () => {
    expect(reachedApplications(own, ['c', 'a', 'b'])).toEqual(['a']);
    expect(reachedApplications(wide, ['c', 'a', 'b'])).toEqual(['a', 'b', 'c']);
  });
});
