import { describe, expect, it } from 'vitest';
import { computeSignature, signatureHeaderValue, verifySignature } from '../src/signing.ts';

describe('callback signatures', () => {
  it('matches the documented test vector (computed independently with openssl)', () => {
    expect(computeSignature('whsec_test', 1_700_000_000, '{"eventId":"e1"}')).toBe(
      'ead19a02fbe0bb6d0c7f3d25cef8280176aefaac9755cd99505dad3b267a6de9',
    );
  });

  it('verifies within the tolerance, refuses expired, tampered and malformed headers', () => {
    const body = '{"eventId":"e1","sequence":1}';
    const header = signatureHeaderValue(['whsec_new', 'whsec_old'], 1_700_000_000, body);
    expect(verifySignature(header, body, 'whsec_old', 1_700_000_100)).toEqual({ ok: true });
    expect(verifySignature(header, body, 'whsec_new', 1_700_000_000 - 299)).toEqual({ ok: true });
    expect(verifySignature(header, body, 'whsec_new', 1_700_000_301)).toEqual({
      ok: false,
      reason: 'EXPIRED',
    });
    expect(verifySignature(header, `${body} `, 'whsec_new', 1_700_000_000)).toEqual({
      ok: false,
      reason: 'MISMATCH',
    });
    expect(verifySignature(header, body, 'whsec_other', 1_700_000_000)).toEqual({
      ok: false,
      reason: 'MISMATCH',
    });
    expect(verifySignature('v1=abc', body, 'whsec_new', 1_700_000_000)).toEqual({
      ok: false,
      reason: 'MALFORMED',
    });
    expect(verifySignature(undefined, body, 'whsec_new', 1_700_000_000)).toEqual({
      ok: false,
      reason: 'MALFORMED',
    });
  });

  it('signs and verifies the raw bytes: the same MAC as the text, and bytes that are not UTF-8 verify unchanged', () => {
    const vector = Buffer.from('{"eventId":"e1"}');
    expect(computeSignature('whsec_test', 1_700_000_000, vector)).toBe(
      'ead19a02fbe0bb6d0c7f3d25cef8280176aefaac9755cd99505dad3b267a6de9',
    );
    // A body whose bytes do not survive decoding to text and back (an invalid UTF-8 byte).
    const bytes = Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]);
    const header = signatureHeaderValue(['whsec_a'], 1_700_000_000, bytes);
    expect(verifySignature(header, bytes, 'whsec_a', 1_700_000_000)).toEqual({ ok: true });
    expect(verifySignature(header, bytes.toString('utf8'), 'whsec_a', 1_700_000_000)).toEqual({
      ok: false,
      reason: 'MISMATCH',
    });
  });
});
