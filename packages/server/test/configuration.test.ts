/**
 * The configuration comes from the features' settings schemas: docs/configuration.md is generated from
 * them (and fails here when it drifts), every variable it lists is read, and a `TDP_*` variable that no
 * setting reads is reported.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { generateKeyringEntry } from '../src/core/identity/secretBox.ts';
import {
  ConfigError,
  configFromEnv,
  configurationReference,
  defaultSettings,
  unknownServerVariables,
} from '../src/main.ts';

const required = {
  DATABASE_URL: 'postgres://127.0.0.1/tdp',
  TDP_ADMIN_TOKEN: 'adm_0123456789abcdef',
  TDP_SECRET_KEYS: generateKeyringEntry('k1'),
};

describe('docs/configuration.md', () => {
  it('is what the settings schemas generate (run `npm run docs:config` after changing a setting)', () => {
    const written = readFileSync(new URL('../../../docs/configuration.md', import.meta.url), 'utf8');
    expect(written).toBe(configurationReference());
  });

  it('lists every variable of a setting, each once', () => {
    const listed = [...configurationReference().matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]);
    expect(new Set(listed).size).toBe(listed.length);
    for (const name of ['DATABASE_URL', 'TDP_GRPC_PORT', 'TDP_RETENTION_DAYS', 'TDP_RATE_LIMIT_WORKER_BURST'])
      expect(listed).toContain(name);
  });
});

describe('the settings', () => {
  it('are their defaults when only the required variables are set', () => {
    const config = configFromEnv(required);
    for (const [key, value] of Object.entries(defaultSettings))
      expect(config[key as keyof typeof config], key).toEqual(value);
    expect(config.publicUrl).toBe('http://127.0.0.1:8080');
  });

  it('read each variable over the default, and an override over both', () => {
    const env = {
      ...required,
      TDP_CALLBACK_TIMEOUT_MS: '2500',
      TDP_RUN_LOOPS: 'false',
      TDP_RATE_LIMIT_WORKER_PER_SECOND: '7',
      TDP_RETENTION_OUTBOX_DAYS: '3',
      TDP_NOTIFICATION_WEBHOOK_URL: 'https://hooks.example/tdp',
      TDP_HOST: '0.0.0.0',
      TDP_PORT: '9000',
    };
    const config = configFromEnv(env, { callbackTimeoutMs: 99 });
    expect(config.callbackTimeoutMs).toBe(99);
    expect(config.runLoops).toBe(false);
    expect(config.rateLimits.worker).toEqual({ perSecond: 7, burst: 20_000 });
    expect(config.retention.outboxDays).toBe(3);
    expect(config.retention.taskDays).toBe(30);
    expect(config.notificationDelivery.webhookUrl).toBe('https://hooks.example/tdp');
    expect(config.publicUrl).toBe('http://127.0.0.1:9000');
  });

  it('refuse a missing required variable and a malformed one, naming it', () => {
    expect(() => configFromEnv({ ...required, DATABASE_URL: ' ' })).toThrow(
      new ConfigError('DATABASE_URL is required'),
    );
    expect(() => configFromEnv({ ...required, TDP_CALLBACK_TIMEOUT_MS: 'soon' })).toThrow(
      /TDP_CALLBACK_TIMEOUT_MS must be a non-negative integer/,
    );
    expect(() => configFromEnv({ ...required, CENTRIFUGO_API_URL: 'http://127.0.0.1:8000/api' })).toThrow(
      /CENTRIFUGO_API_KEY is required/,
    );
    expect(() => configFromEnv({ ...required, TDP_ADMIN_TOKEN: 'short' })).toThrow(/at least 16 characters/);
  });
});

describe('an unknown TDP_* variable', () => {
  it('is reported, while the settings’ own and the ones named as known are not', () => {
    const env = {
      ...required,
      TDP_CALLBACK_TIMOUT_MS: '2500',
      TDP_RETENTION_OUTBOX_DAYS: '3',
      TDP_HOME: '/tmp/tdp',
      PATH: '/usr/bin',
    };
    expect(unknownServerVariables(env, ['TDP_HOME'])).toEqual(['TDP_CALLBACK_TIMOUT_MS']);
    expect(unknownServerVariables(env)).toEqual(['TDP_CALLBACK_TIMOUT_MS', 'TDP_HOME']);
  });
});
