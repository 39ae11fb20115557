/** Reading a Centrifugo v6 JSON config into gateway options (`tdp gateway --config`). */
import { describe, expect, it } from 'vitest';
import { durationMs } from '../src/centrifugoConfig.ts';
import { CentrifugoConfigError, readCentrifugoConfig } from '../src/index.ts';

const problemsOf = (config: unknown): string[] => {
  try {
    readCentrifugoConfig(config);
    return [];
  } catch (error) {
    if (error instanceof CentrifugoConfigError) return error.problems;
    throw error;
  }
};

describe('a Centrifugo config', () => {
  it('maps the supported subset to gateway options', () => {
    const { options, listen } = readCentrifugoConfig({
      client: {
        token: { hmac_secret_key: 'secret', audience: 'tdp', issuer: 'me' },
        insecure: false,
        allow_anonymous_connect_without_token: true,
      },
      http_api: { key: 'api' },
      http_server: { address: '127.0.0.1', port: 9000 },
      channel: {
        without_namespace: { presence: true },
        namespaces: [
          {
            name: 'chat',
            join_leave: true,
            allow_publish_for_client: true,
            history_size: 20,
            history_ttl: '1h30m',
            force_recovery: true,
          },
        ],
      },
    });
    expect(options).toMatchObject({
      hmacKey: 'secret',
      audience: 'tdp',
      issuer: 'me',
      apiKey: 'api',
      insecure: false,
      allowAnonymousConnectWithoutToken: true,
    });
    expect(listen).toEqual({ address: '127.0.0.1', port: 9000 });
    expect(options.channels?.withoutNamespace.presence).toBe(true);
    expect(options.channels?.namespaces.chat).toMatchObject({
      joinLeave: true,
      allowPublishForClient: true,
      allowSubscribeForClient: false,
      forceRecovery: true,
    });
    expect(options.history?.('chat:room')).toEqual({ size: 20, ttlMs: 5_400_000 });
    // No history_size/ttl: no history, as in Centrifugo.
    expect(options.history?.('lobby')).toEqual({ size: 0, ttlMs: 0 });
  });

  it('lists every unknown key and every value of the wrong type instead of ignoring them', () => {
    expect(
      problemsOf({
        client: { insecure: 'yes', proxy: {} },
        admin: { enabled: true },
        channel: { namespaces: [{ name: 'chat', history_ttl: '10 minutes', channel_regex: '.*' }] },
      }).sort(),
    ).toEqual(
      [
        'unknown key admin',
        'unknown key client.proxy',
        'client.insecure: must be boolean',
        'unknown key channel.namespaces.0.channel_regex',
      ].sort(),
    );
    expect(problemsOf({ channel: { namespaces: [{ name: 'chat', history_ttl: '10 minutes' }] } })).toEqual([
      'chat.history_ttl: not a duration (e.g. "300s")',
    ]);
    expect(problemsOf({ channel: { namespaces: [{ name: 'a', presence: true }] } })).toHaveLength(1);
  });

  it('takes the origins, channel length, health, history permissions and engine of a config', () => {
    const { options, redis } = readCentrifugoConfig({
      client: { allowed_origins: ['https://*.example.com'] },
      channel: {
        max_length: 512,
        namespaces: [{ name: 'feed', allow_history_for_subscriber: true, allow_history_for_client: false }],
      },
      health: { enabled: true },
      engine: { type: 'redis', redis: { address: ['127.0.0.1:6379'], prefix: 'tdp-centrifugo' } },
    });
    expect(options).toMatchObject({
      allowedOrigins: ['https://*.example.com'],
      channelMaxLength: 512,
      health: true,
    });
    expect(options.channels?.namespaces.feed).toMatchObject({
      allowHistoryForSubscriber: true,
      allowHistoryForClient: false,
    });
    // Centrifugo takes host:port as well as a URL.
    expect(redis).toEqual({ url: 'redis://127.0.0.1:6379', prefix: 'tdp-centrifugo' });
    // Centrifugo's defaults: 255 characters, no origin but none, memory, no health endpoint.
    const defaults = readCentrifugoConfig({});
    expect(defaults.options).toMatchObject({ allowedOrigins: [], channelMaxLength: 255, health: false });
    expect(defaults.redis).toBeUndefined();
    expect(
      readCentrifugoConfig({ engine: { type: 'redis', redis: { address: 'rediss://r:6380' } } }).redis,
    ).toEqual({ url: 'rediss://r:6380' });
    expect(problemsOf({ engine: { type: 'nats' } })).toEqual([
      'engine.type: "nats" is not supported (memory or redis)',
    ]);
    expect(problemsOf({ engine: { type: 'redis', redis: { address: ['a:1', 'b:2'] } } })).toEqual([
      'engine.redis.address: one address only (Redis sharding is not supported)',
    ]);
    expect(
      problemsOf({
        engine: { type: 'redis', redis: { db: 2 } },
        health: { enabled: true, path: '/h' },
      }).sort(),
    ).toEqual(['unknown key engine.redis.db', 'unknown key health.path']);
  });

  it('reads durations as Go does: unit strings or nanoseconds', () => {
    expect(durationMs('300s')).toBe(300_000);
    expect(durationMs('1.5m')).toBe(90_000);
    expect(durationMs('720h')).toBe(2_592_000_000);
    expect(durationMs(2_000_000_000)).toBe(2_000);
    expect(durationMs('0')).toBe(0);
    expect(durationMs('5')).toBeNaN();
  });
});
