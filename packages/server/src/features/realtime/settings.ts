/** The realtime feature's settings: the gateway, Centrifugo, the hand-off and the relay. */
import {
  checkMasterName,
  parseSentinelAddresses,
  type RedisSentinelTarget,
  RedisTargetError,
} from '@tdp/gateway';
import { type Static, Type } from 'typebox';
import type { BucketPolicy } from '../../core/shared/tokenBuckets.ts';
import type { LoopPacing } from '../../host/loops/wakeableLoop.ts';
import { ConfigError, setting, settingsSlice, sliceDefaults } from '../../host/settings.ts';

/** `TDP_REALTIME_TOKEN_SECRET`: null when unset, else at least 32 bytes (as Centrifugo asks of HS256). */
export function realtimeTokenSecretFrom(value: string | null | undefined): string | null {
  const secret = value?.trim() || null;
  if (secret && Buffer.byteLength(secret) < 32)
    throw new ConfigError('TDP_REALTIME_TOKEN_SECRET must be at least 32 bytes (it signs realtime tokens)');
  return secret;
}

/**
 * The gateway's Redis through Sentinel: `REDIS_SENTINELS` (`host:port`, comma-separated) and
 * `REDIS_SENTINEL_MASTER`, with `REDIS_SENTINEL_PASSWORD` and `REDIS_PASSWORD` when they need them;
 * undefined when `REDIS_SENTINELS` is unset. A bad address or a missing master name is a ConfigError.
 */
export function redisSentinelFrom(env: NodeJS.ProcessEnv): RedisSentinelTarget | undefined {
  const list = env.REDIS_SENTINELS?.trim();
  const masterName = env.REDIS_SENTINEL_MASTER?.trim();
  if (!list) {
    if (masterName) throw new ConfigError('REDIS_SENTINEL_MASTER needs REDIS_SENTINELS (host:port,…)');
    return undefined;
  }
  if (!masterName) throw new ConfigError('REDIS_SENTINELS needs REDIS_SENTINEL_MASTER (the master name)');
  try {
    const sentinels = parseSentinelAddresses(list);
    checkMasterName(masterName);
    const password = env.REDIS_PASSWORD?.trim();
    const sentinelPassword = env.REDIS_SENTINEL_PASSWORD?.trim();
    return {
      sentinels,
      masterName,
      ...(password ? { password } : {}),
      ...(sentinelPassword ? { sentinelPassword } : {}),
    };
  } catch (error) {
    if (error instanceof RedisTargetError)
      throw new ConfigError(`REDIS_SENTINELS / REDIS_SENTINEL_MASTER: ${error.message}`);
    throw error;
  }
}

export const realtimeSettings = settingsSlice(
  Type.Object({
    redisUrl: setting.optionalString({
      env: 'REDIS_URL',
      description:
        'The in-process gateway keeps its channels in Redis, so several nodes serve them; unset: in memory.',
    }),
    redisSentinel: setting.custom<RedisSentinelTarget | null>({
      variables: {
        REDIS_SENTINELS: {
          type: '`host:port`, comma-separated',
          default: '—',
          description:
            "The in-process gateway keeps its channels in Redis through these sentinels (instead of `REDIS_URL`): after a failover its nodes follow them to the promoted replica (docs/realtime.md, 'Redis Sentinel').",
        },
        REDIS_SENTINEL_MASTER: {
          type: 'string',
          default: '—',
          description: 'The master name the sentinels monitor (required with `REDIS_SENTINELS`).',
        },
        REDIS_SENTINEL_PASSWORD: {
          type: 'string',
          default: '—',
          description: "The sentinels' own password, if they have one.",
        },
        REDIS_PASSWORD: {
          type: 'string',
          default: '—',
          description: "With `REDIS_SENTINELS`: the master's (and its replicas') password.",
        },
      },
      typeName: 'sentinels',
      default: null,
      description: "The gateway's Redis found through Sentinel.",
      parse: (env) => redisSentinelFrom(env),
    }),
    gatewayApiKey: setting.optionalString({
      env: 'TDP_GATEWAY_API_KEY',
      description: "Enables the gateway's server API (`/api/<method>`, header `X-API-Key`).",
    }),
    realtimeJwksUrl: setting.optionalString({
      env: 'TDP_REALTIME_JWKS_URL',
      description: 'Realtime tokens signed with RS256/ES256 by these keys are accepted too.',
    }),
    centrifugoApiUrl: setting.optionalString({
      env: 'CENTRIFUGO_API_URL',
      description: 'Publish through this Centrifugo-compatible server API instead of the in-process gateway.',
    }),
    centrifugoApiKey: setting.optionalString({
      env: 'CENTRIFUGO_API_KEY',
      description: "Centrifugo's `http_api.key` (required with `CENTRIFUGO_API_URL`).",
    }),
    realtimeWsUrl: setting.optionalString({
      env: 'TDP_REALTIME_WS_URL',
      description: "The WebSocket URL handed out with connection tokens (default: this server's).",
    }),
    realtimeTokenSecret: setting.optionalString({
      env: 'TDP_REALTIME_TOKEN_SECRET',
      description:
        "Realtime tokens' HMAC secret, shared with Centrifugo (at least 32 bytes); unset: a key derived from `TDP_SECRET_KEYS`.",
    }),
    realtimeHistory: setting.value({
      default: { size: 300, followedSize: 100, ttlMs: 10 * 60_000 },
      description:
        'History the gateway keeps per channel (`followedSize`: task and workflow channels, while followed).',
    }),
    taskDetailSubscriptionLimit: setting.value({
      default: 20,
      description: 'Task details one realtime client follows at once at most.',
    }),
    realtimeClientQueue: setting.value({
      // Centrifugo's client_queue_max_size (1 MiB) and write timeout (1 s).
      default: { pressureBytes: 64 * 1024, maxBytes: 1024 * 1024, closeGraceMs: 1_000 },
      description:
        "Each connection's send queue: past `pressureBytes` unsent its progress messages coalesce to each task's newest; past `maxBytes` it is closed as slow (3008) and cut `closeGraceMs` later if it does not read as far as the close.",
    }),
    realtimeHandoffGraceMs: setting.integer({
      env: 'TDP_REALTIME_HANDOFF_GRACE_MS',
      default: 5_000,
      description:
        'With a durable gateway, the relay loop takes what the hand-off did not publish after this long.',
    }),
    realtimeFollowPollMs: setting.integer({
      env: 'TDP_REALTIME_FOLLOW_POLL_MS',
      default: 1_000,
      description:
        'With Centrifugo: how often each replica reads the realtime rows other replicas committed, for its own task streams, should no NOTIFY wake it.',
    }),
    realtimeLoop: setting.value<LoopPacing>({
      default: { batchSize: 200, maxIdleMs: 1_000, batchWindowMs: 2 },
      description: "The relay loop's pacing.",
    }),
    visibilityReportMaxSamples: setting.value({
      default: 50,
      description: 'Samples one `POST /v1/telemetry/visibility` may carry (docs/observability.md).',
    }),
    visibilityReportRate: setting.value<BucketPolicy>({
      // A browser reports at most every few seconds; a burst covers a reconnect's catch-up.
      default: { perSecond: 0.5, burst: 5 },
      description:
        'Visibility reports per user (a token bucket per application and user); `perSecond: 0` is no limit.',
    }),
  }),
  (settings) => {
    realtimeTokenSecretFrom(settings.realtimeTokenSecret);
    if (settings.redisUrl && settings.redisSentinel)
      throw new ConfigError('set REDIS_URL or REDIS_SENTINELS, not both');
    if (settings.centrifugoApiUrl && !settings.centrifugoApiKey)
      throw new ConfigError('CENTRIFUGO_API_KEY is required with CENTRIFUGO_API_URL');
  },
);

export type RealtimeSettings = Static<(typeof realtimeSettings)['schema']>;

export const defaultRealtimeSettings = sliceDefaults([realtimeSettings]) as RealtimeSettings;
