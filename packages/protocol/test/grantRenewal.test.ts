import { describe, expect, it } from 'vitest';
import { grantRenewalDueAt } from '../src/grants.ts';

describe('grantRenewalDueAt', () => {
  const policy = { remainingFraction: 0.25, remainingMs: 60_000 };
  it('renews a long grant when the larger of the fraction and the time is left', () => {
    // 1 hour: 25% (15 min) is more than 60 s.
    expect(grantRenewalDueAt(0, 3_600_000, policy)).toBe(3_600_000 - 900_000);
    // 2 minutes: 60 s is more than 25% (30 s), and no more than half.
    expect(grantRenewalDueAt(0, 120_000, policy)).toBe(60_000);
  });
  it('never before half the lifetime, so a grant shorter than remainingMs is not renewed in a loop', () => {
    expect(grantRenewalDueAt(1_000, 4_000, policy)).toBe(2_500);
    expect(grantRenewalDueAt(5_000, 5_000, policy)).toBe(5_000);
  });
});
