/** verifyCallback on the protocol's signature scheme: its test vector, rotation, and what it refuses. */
import { signatureHeaderValue } from '@tdp/protocol';
import { describe, expect, it } from 'vitest';
import { verifyCallback } from '../src/index.ts';

// The protocol's test vector (packages/protocol/src/signing.ts, docs/callbacks.md).
const vector = {
  secret: 'whsec_test',
  t: 1_700_000_000,
  body: '{"eventId":"e1"}',
  header: 't=1700000000,v1=ead19a02fbe0bb6d0c7f3d25cef8280176aefaac9755cd99505dad3b267a6de9',
};
const at = (seconds: number) => ({ nowSeconds: seconds });

describe('verifyCallback', () => {
  it('accepts the test vector, as text and as raw bytes', () => {
    expect(verifyCallback(vector.body, vector.header, [vector.secret], at(vector.t))).toEqual({ ok: true });
    expect(verifyCallback(Buffer.from(vector.body), vector.header, [vector.secret], at(vector.t))).toEqual({
      ok: true,
    });
  });

  it('refuses a wrong secret', () => {
    expect(verifyCallback(vector.body, vector.header, ['whsec_other'], at(vector.t))).toEqual({
      ok: false,
      reason: 'MISMATCH',
    });
  });

  it('refuses a stale timestamp, and one too far ahead, outside the tolerance', () => {
    expect(verifyCallback(vector.body, vector.header, [vector.secret], at(vector.t + 301))).toEqual({
      ok: false,
      reason: 'EXPIRED',
    });
    expect(verifyCallback(vector.body, vector.header, [vector.secret], at(vector.t - 301))).toEqual({
      ok: false,
      reason: 'EXPIRED',
    });
    expect(
      verifyCallback(vector.body, vector.header, [vector.secret], {
        nowSeconds: vector.t + 60,
        toleranceSeconds: 30,
      }),
    ).toEqual({ ok: false, reason: 'EXPIRED' });
    expect(verifyCallback(vector.body, vector.header, [vector.secret], at(vector.t + 300))).toEqual({
      ok: true,
    });
  });

  it('refuses a body changed by one byte', () => {
    const changed = Buffer.from(vector.body);
    changed[changed.length - 2] = 0x32; // "e1" → "e2"
    expect(verifyCallback(changed, vector.header, [vector.secret], at(vector.t))).toEqual({
      ok: false,
      reason: 'MISMATCH',
    });
  });

  it('accepts the previous secret during a rotation, whichever the receiver holds', () => {
    const body = '{"eventId":"e9","sequence":3}';
    const header = signatureHeaderValue(['whsec_new', 'whsec_old'], vector.t, body);
    expect(verifyCallback(body, header, ['whsec_old'], at(vector.t))).toEqual({ ok: true });
    expect(verifyCallback(body, header, ['whsec_new'], at(vector.t))).toEqual({ ok: true });
    // A receiver that already has the new secret and still the old one accepts a header signed by the old only.
    const oldOnly = signatureHeaderValue(['whsec_old'], vector.t, body);
    expect(verifyCallback(body, oldOnly, ['whsec_new', 'whsec_old'], at(vector.t))).toEqual({ ok: true });
    expect(verifyCallback(body, oldOnly, ['whsec_new', 'whsec_other'], at(vector.t))).toEqual({
      ok: false,
      reason: 'MISMATCH',
    });
  });

  it('refuses a missing or malformed header, and needs a secret', () => {
    expect(verifyCallback(vector.body, undefined, [vector.secret], at(vector.t))).toEqual({
      ok: false,
      reason: 'MALFORMED',
    });
    expect(verifyCallback(vector.body, 'v1=abc', [vector.secret], at(vector.t))).toEqual({
      ok: false,
      reason: 'MALFORMED',
    });
    expect(() => verifyCallback(vector.body, vector.header, [], at(vector.t))).toThrow(/at least one/);
  });
});
