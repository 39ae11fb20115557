import { describe, expect, it } from 'vitest';
import { TestClock } from '../../../test/harness.ts';
import { TokenBuckets } from '../src/core/shared/tokenBuckets.ts';
import { ConfigError, configFromEnv, defaultSettings } from '../src/main.ts';

describe('TokenBuckets', () => {
  it('lets a burst through, then one a second, never more than the burst after a long idle', () => {
    const clock = new TestClock();
    const buckets = new TokenBuckets(clock, { perSecond: 2, burst: 3 });
    const takes = (n: number) => Array.from({ length: n }, () => buckets.take('a').allowed);
    expect(takes(4)).toEqual([true, true, true, false]);
    expect(buckets.take('a')).toEqual({ allowed: false, retryAfterMs: 500 });
    clock.advance(500);
    expect(takes(2)).toEqual([true, false]);
    clock.advance(3_600_000);
    expect(takes(4)).toEqual([true, true, true, false]);
  });

  it('keys are apart, and perSecond 0 is no limit', () => {
    const clock = new TestClock();
    const limited = new TokenBuckets(clock, { perSecond: 1, burst: 1 });
    expect([limited.take('a').allowed, limited.take('a').allowed, limited.take('b').allowed]).toEqual([
      true,
      false,
      true,
    ]);
    const off = new TokenBuckets(clock, { perSecond: 0, burst: 0 });
    expect(Array.from({ length: 100 }, () => off.take('a').allowed).every(Boolean)).toBe(true);
  });

  it('when full, forgets only the buckets that have refilled', () => {
    const clock = new TestClock();
    const buckets = new TokenBuckets(clock, { perSecond: 1, burst: 1 }, 2);
    buckets.take('old');
    clock.advance(1_000);
    buckets.take('recent');
    buckets.take('new'); // the map is full: 'old' has refilled and goes, 'recent' stays empty
    expect(buckets.size).toBe(2);
    expect(buckets.take('recent').allowed).toBe(false);
  });
});

describe('rate limit settings', () => {
  const env = { DATABASE_URL: 'postgres://x', TDP_ADMIN_TOKEN: 'a'.repeat(16), TDP_SECRET_KEYS: '' };
  const base = { secretKeyring: { activeKeyId: 'k', keys: new Map() } } as never;

  it('reads TDP_RATE_LIMIT_<CREDENTIAL>_PER_SECOND and _BURST over the defaults', () => {
    const config = configFromEnv(
      { ...env, TDP_RATE_LIMIT_WORKER_PER_SECOND: '5', TDP_RATE_LIMIT_WORKER_BURST: '7' },
      base,
    );
    expect(config.rateLimits).toEqual({ ...defaultSettings.rateLimits, worker: { perSecond: 5, burst: 7 } });
  });

  it('refuses a limit with no burst', () => {
    expect(() => configFromEnv({ ...env, TDP_RATE_LIMIT_EXECUTION_BURST: '0' }, base)).toThrow(ConfigError);
  });
});
