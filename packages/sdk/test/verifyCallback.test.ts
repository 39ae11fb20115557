/** verifyCallback on the protocol's signature scheme: its test vector, rotation, and what it refuses. */
import { signatureHeaderValue } from '@tdp/protocol';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { standardWebhookSecret, verifyCallback } from '../src/index.ts';

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

/** The Standard Webhooks path, signed by the `standardwebhooks` package itself (not by TDP's code). */
describe('verifyCallback with Standard Webhooks headers', () => {
  const secret = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
  const body = '{"eventId":"e1","sequence":1}';
  const t = 1_700_000_000;
  const signed = (key: string, id = 'cbd_1', seconds = t, legacy?: string) => ({
    'webhook-id': id,
    'webhook-timestamp': String(seconds),
    'webhook-signature': new Webhook(key).sign(id, new Date(seconds * 1000), body),
    ...(legacy ? { 'tdp-signature': legacy } : {}),
  });

  it('accepts a Standard Webhooks signed request, as text and raw bytes, with header names in any case', () => {
    expect(verifyCallback(body, signed(secret), [secret], at(t))).toEqual({ ok: true });
    expect(verifyCallback(Buffer.from(body), signed(secret), [secret], at(t))).toEqual({ ok: true });
    const shouted = Object.fromEntries(Object.entries(signed(secret)).map(([k, v]) => [k.toUpperCase(), v]));
    expect(verifyCallback(body, shouted, [secret], at(t))).toEqual({ ok: true });
  });

  it('accepts the old header alone, given as the headers or as its value', () => {
    const legacy = signatureHeaderValue([secret], t, body);
    expect(verifyCallback(body, { 'tdp-signature': legacy }, [secret], at(t))).toEqual({ ok: true });
    expect(verifyCallback(body, legacy, [secret], at(t))).toEqual({ ok: true });
  });

  it('refuses a tampered body, a wrong id, an expired timestamp and another secret', () => {
    expect(verifyCallback(body.replace('e1', 'e2'), signed(secret), [secret], at(t))).toEqual({
      ok: false,
      reason: 'MISMATCH',
    });
    expect(verifyCallback(body, { ...signed(secret), 'webhook-id': 'cbd_2' }, [secret], at(t))).toEqual({
      ok: false,
      reason: 'MISMATCH',
    });
    expect(verifyCallback(body, signed(secret), [secret], at(t + 301))).toEqual({
      ok: false,
      reason: 'EXPIRED',
    });
    const other = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
    expect(verifyCallback(body, signed(other), [secret], at(t))).toEqual({ ok: false, reason: 'MISMATCH' });
    // A forged Standard signature is not rescued by a valid old header beside it.
    const legacy = signatureHeaderValue([secret], t, body);
    expect(verifyCallback(body, signed(other, 'cbd_1', t, legacy), [secret], at(t))).toEqual({
      ok: false,
      reason: 'MISMATCH',
    });
    expect(verifyCallback(body, { 'webhook-signature': 'v1,abc' }, [secret], at(t))).toEqual({
      ok: false,
      reason: 'MALFORMED',
    });
  });

  it('accepts either secret during a rotation, and an older base64url secret through its whsec_ equivalent', () => {
    const rotated = `whsec_${Buffer.alloc(32, 2).toString('base64')}`;
    const headers = {
      ...signed(secret),
      'webhook-signature': `${signed(rotated)['webhook-signature']} ${signed(secret)['webhook-signature']}`,
    };
    expect(verifyCallback(body, headers, [rotated], at(t))).toEqual({ ok: true });
    expect(verifyCallback(body, headers, [secret], at(t))).toEqual({ ok: true });
    const older = 'whsec_q-8_aZ0-Yk9uJ1x_Wm3Lr7Tc2Vb5Ne4Ha6Gd8Fs0Pw';
    expect(verifyCallback(body, signed(standardWebhookSecret(older)), [older], at(t))).toEqual({ ok: true });
  });
});
