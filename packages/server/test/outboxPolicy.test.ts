import { describe, expect, it } from 'vitest';
import { afterFailure, backoffSeconds, realtimeClaimPolicy } from '../src/core/outbox/policy.ts';

describe('outbox retry policy', () => {
  it('backs off 2^attempts seconds, capped at 1,024 s', () => {
    expect([1, 2, 3, 10, 11, 19].map((a) => backoffSeconds(a))).toEqual([2, 4, 8, 1024, 1024, 1024]);
  });

  it('gives up after the 20th attempt', () => {
    const now = new Date('2026-01-01T00:00:00Z');
    expect(afterFailure(1, now)).toEqual({ status: 'FAILED', availableAt: new Date('2026-01-01T00:00:02Z') });
    expect(afterFailure(19, now)).toMatchObject({ status: 'FAILED' });
    expect(afterFailure(20, now)).toEqual({ status: 'DEAD' });
  });

  it('spreads realtime retries by up to half their wait, capped at 30 s', () => {
    const now = new Date('2026-01-01T00:00:00Z');
    const wait = (attempts: number, random: number) => {
      const outcome = afterFailure(attempts, now, realtimeClaimPolicy, () => random);
      return outcome.status === 'FAILED' ? outcome.availableAt.getTime() - now.getTime() : null;
    };
    expect([wait(1, 0), wait(1, 0.5), wait(1, 1)]).toEqual([1_000, 2_000, 3_000]);
    expect(wait(10, 0.5)).toBe(30_000);
    expect(wait(20, 0.5)).toBeNull();
  });
});
