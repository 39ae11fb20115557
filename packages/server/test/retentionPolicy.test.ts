/** The retention settings (docs/retention.md): read from the environment, refused when too short. */
import { describe, expect, it } from 'vitest';
import { claimPolicy } from '../src/core/outbox/policy.ts';
import { cutoff, deletePolicies, longestRetryWindowMs } from '../src/core/retention/policy.ts';
import { ConfigError, configFromEnv, defaultSettings, generateKeyringEntry } from '../src/main.ts';

const env = {
  DATABASE_URL: 'postgres://localhost/x',
  TDP_ADMIN_TOKEN: 'a'.repeat(32),
  TDP_SECRET_KEYS: generateKeyringEntry('k'),
};

describe('retention settings', () => {
  it('default to 30 days of task history, 7 of published rows, and no archive directory', () => {
    const config = configFromEnv(env);
    expect(config.retention).toEqual(defaultSettings.retention);
    expect(config.retention.taskDays).toBe(30);
    expect(config.archiveDirectory).toBeNull();
    const windows = Object.fromEntries(deletePolicies(config.retention).map((p) => [p.table, p.windowDays]));
    expect(windows).toMatchObject({
      outbox_event: 7,
      realtime_outbox: 7,
      callback_delivery: 7,
      idempotency: 30,
    });
  });

  it('run the sweep unless TDP_RETENTION_SWEEP is off; refuse a value that is neither on nor off', () => {
    expect(configFromEnv(env).retention.sweep).toBe(true);
    expect(configFromEnv({ ...env, TDP_RETENTION_SWEEP: 'OFF' }).retention.sweep).toBe(false);
    expect(configFromEnv({ ...env, TDP_RETENTION_SWEEP: 'on' }).retention.sweep).toBe(true);
    expect(() => configFromEnv({ ...env, TDP_RETENTION_SWEEP: 'no' })).toThrow(/TDP_RETENTION_SWEEP/);
  });

  it('read TDP_RETENTION_DAYS, TDP_ARCHIVE_DIR and one variable per table', () => {
    const config = configFromEnv({
      ...env,
      TDP_RETENTION_DAYS: '90',
      TDP_ARCHIVE_DIR: '/var/lib/tdp/archive',
      TDP_RETENTION_OUTBOX_DAYS: '2',
      TDP_RETENTION_GRANT_DAYS: '1',
    });
    expect(config.retention).toMatchObject({ taskDays: 90, outboxDays: 2, grantDays: 1, realtimeDays: 7 });
    expect(config.archiveDirectory).toBe('/var/lib/tdp/archive');
  });

  it('refuse windows shorter than a day, or idempotency records that a retry could outlive', () => {
    expect(() => configFromEnv({ ...env, TDP_RETENTION_IDEMPOTENCY_DAYS: '0' })).toThrow(ConfigError);
    expect(() => configFromEnv({ ...env, TDP_RETENTION_DAYS: '0' })).toThrow(/retention/);
    // The outbox policy retries for about four hours: a day outlives it, and it is counted in full.
    const longest = longestRetryWindowMs(claimPolicy);
    expect(longest).toBeGreaterThan(3 * 3_600_000);
    expect(longest).toBeLessThan(86_400_000);
    expect(cutoff(new Date('2026-03-31T00:00:00Z'), 30).toISOString()).toBe('2026-03-01T00:00:00.000Z');
  });
});
