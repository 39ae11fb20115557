/**
 * A Centrifugo v6 JSON config (centrifugal/centrifugo internal/configtypes) read into gateway options:
 * the subset the gateway supports, which includes every key of the config TDP itself makes (`tdp
 * centrifugo-config`; a server test feeds that one through here). A key outside it is an error that
 * names it, so a config written for Centrifugo never silently means something else here.
 */
import Type, { type Static } from 'typebox';
import Value from 'typebox/value';
import { historyFromNamespaces } from './namespaces.ts';
import type { ChannelNamespaces, ChannelOptions, GatewayOptions } from './options.ts';
import {
  checkMasterName,
  parseSentinelAddresses,
  type RedisTarget,
  RedisTargetError,
} from './redisConnection.ts';

const flag = Type.Optional(Type.Boolean());
/** Go's time.Duration in JSON: a string such as "300s" or "1h30m", or a number of nanoseconds. */
const duration = Type.Optional(Type.Union([Type.String(), Type.Integer({ minimum: 0 })]));

const channelOptionsSchema = {
  presence: flag,
  join_leave: flag,
  force_push_join_leave: flag,
  allow_subscribe_for_client: flag,
  allow_subscribe_for_anonymous: flag,
  allow_publish_for_client: flag,
  allow_publish_for_subscriber: flag,
  allow_publish_for_anonymous: flag,
  allow_presence_for_client: flag,
  allow_presence_for_subscriber: flag,
  allow_presence_for_anonymous: flag,
  allow_history_for_client: flag,
  allow_history_for_subscriber: flag,
  allow_history_for_anonymous: flag,
  history_size: Type.Optional(Type.Integer({ minimum: 0 })),
  history_ttl: duration,
  force_recovery: flag,
};
/** Centrifugo's channel.max_length when unset. */
const centrifugoChannelMaxLength = 255;
const strict = { additionalProperties: false } as const;

const configSchema = Type.Object(
  {
    client: Type.Optional(
      Type.Object(
        {
          token: Type.Optional(
            Type.Object(
              {
                hmac_secret_key: Type.Optional(Type.String({ minLength: 1 })),
                jwks_public_endpoint: Type.Optional(Type.String({ minLength: 1 })),
                audience: Type.Optional(Type.String({ minLength: 1 })),
                issuer: Type.Optional(Type.String({ minLength: 1 })),
              },
              strict,
            ),
          ),
          insecure: flag,
          allow_anonymous_connect_without_token: flag,
          allowed_origins: Type.Optional(Type.Array(Type.String())),
        },
        strict,
      ),
    ),
    health: Type.Optional(Type.Object({ enabled: flag }, strict)),
    engine: Type.Optional(
      Type.Object(
        {
          type: Type.Optional(Type.String()),
          redis: Type.Optional(
            Type.Object(
              {
                address: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
                prefix: Type.Optional(Type.String()),
                user: Type.Optional(Type.String()),
                password: Type.Optional(Type.String()),
                // Centrifugo v6's Sentinel keys: with `sentinel_address`, `address` is not used.
                sentinel_address: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
                sentinel_master_name: Type.Optional(Type.String()),
                sentinel_user: Type.Optional(Type.String()),
                sentinel_password: Type.Optional(Type.String()),
              },
              strict,
            ),
          ),
        },
        strict,
      ),
    ),
    http_api: Type.Optional(Type.Object({ key: Type.Optional(Type.String({ minLength: 1 })) }, strict)),
    http_server: Type.Optional(
      Type.Object(
        {
          address: Type.Optional(Type.String()),
          port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65_535 })),
        },
        strict,
      ),
    ),
    channel: Type.Optional(
      Type.Object(
        {
          max_length: Type.Optional(Type.Integer({ minimum: 1 })),
          without_namespace: Type.Optional(Type.Object(channelOptionsSchema, strict)),
          namespaces: Type.Optional(
            Type.Array(
              Type.Object(
                { name: Type.String({ pattern: '^[-a-zA-Z0-9_.]{2,}$' }), ...channelOptionsSchema },
                strict,
              ),
            ),
          ),
        },
        strict,
      ),
    ),
  },
  strict,
);

type CentrifugoConfig = Static<typeof configSchema>;
type CentrifugoChannelOptions = NonNullable<NonNullable<CentrifugoConfig['channel']>['without_namespace']>;

/** What a config says, in the gateway's terms; `hmacKey` and `apiKey` only when the config sets them. */
export interface GatewayConfig {
  options: Omit<GatewayOptions, 'hmacKey'> & { hmacKey?: string };
  /** Centrifugo's `http_server.address` and `port`. */
  listen: { address?: string; port?: number };
  /**
   * Centrifugo's `engine` of type `redis`: the gateway's Redis engine on that Redis (by `address`, or
   * through Sentinel by `sentinel_address` and `sentinel_master_name`), with that prefix.
   */
  redis?: RedisTarget & { prefix?: string };
}

/** A config the gateway cannot take as it is; `problems` names each key (JSON-pointer-like paths). */
export class CentrifugoConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`unsupported Centrifugo config: ${problems.join('; ')}`);
    this.name = 'CentrifugoConfigError';
  }
}

/** Reads a parsed Centrifugo v6 JSON config; throws CentrifugoConfigError listing what it cannot take. */
export function readCentrifugoConfig(config: unknown): GatewayConfig {
  const problems = configProblems(config);
  if (problems.length > 0) throw new CentrifugoConfigError(problems);
  const valid = config as CentrifugoConfig;
  const token = valid.client?.token;
  const namespaces: ChannelNamespaces = {
    withoutNamespace: channelOptions(valid.channel?.without_namespace ?? {}, problems, 'without_namespace'),
    namespaces: {},
  };
  for (const namespace of valid.channel?.namespaces ?? []) {
    if (namespaces.namespaces[namespace.name]) problems.push(`channel.namespaces: ${namespace.name} twice`);
    namespaces.namespaces[namespace.name] = channelOptions(namespace, problems, namespace.name);
  }
  const redis = redisOf(valid.engine, problems);
  if (problems.length > 0) throw new CentrifugoConfigError(problems);
  const options: GatewayConfig['options'] = {
    ...(token?.hmac_secret_key ? { hmacKey: token.hmac_secret_key } : {}),
    ...(token?.jwks_public_endpoint ? { jwksUrl: token.jwks_public_endpoint } : {}),
    ...(token?.audience ? { audience: token.audience } : {}),
    ...(token?.issuer ? { issuer: token.issuer } : {}),
    ...(valid.http_api?.key ? { apiKey: valid.http_api.key } : {}),
    insecure: valid.client?.insecure === true,
    allowAnonymousConnectWithoutToken: valid.client?.allow_anonymous_connect_without_token === true,
    // Centrifugo checks every connection's Origin; with none listed only requests without one pass.
    allowedOrigins: valid.client?.allowed_origins ?? [],
    channelMaxLength: valid.channel?.max_length ?? centrifugoChannelMaxLength,
    health: valid.health?.enabled === true,
    channels: namespaces,
  };
  options.history = historyFromNamespaces(options);
  return { options, listen: { ...valid.http_server }, ...(redis ? { redis } : {}) };
}

/** The Redis engine a config asks for (null for memory); a problem for what the gateway cannot do. */
function redisOf(engine: CentrifugoConfig['engine'], problems: string[]): GatewayConfig['redis'] | null {
  const type = engine?.type ?? 'memory';
  if (type === 'memory') return null;
  if (type !== 'redis') {
    problems.push(`engine.type: "${type}" is not supported (memory or redis)`);
    return null;
  }
  const redis = engine?.redis ?? {};
  const prefix = redis.prefix ? { prefix: redis.prefix } : {};
  const credentials = {
    ...(redis.user ? { username: redis.user } : {}),
    ...(redis.password ? { password: redis.password } : {}),
  };
  if (redis.sentinel_address !== undefined) {
    if (!redis.sentinel_master_name) {
      problems.push('engine.redis.sentinel_master_name: required with sentinel_address');
      return null;
    }
    try {
      return {
        sentinels: parseSentinelAddresses(redis.sentinel_address),
        masterName: checkMasterName(redis.sentinel_master_name),
        ...credentials,
        ...(redis.sentinel_user ? { sentinelUsername: redis.sentinel_user } : {}),
        ...(redis.sentinel_password ? { sentinelPassword: redis.sentinel_password } : {}),
        ...prefix,
      };
    } catch (error) {
      if (!(error instanceof RedisTargetError)) throw error;
      problems.push(`engine.redis.sentinel_address: ${error.message}`);
      return null;
    }
  }
  if (redis.sentinel_master_name) {
    problems.push('engine.redis.sentinel_master_name: needs sentinel_address');
    return null;
  }
  const addresses = [redis.address ?? 'redis://127.0.0.1:6379'].flat();
  if (addresses.length !== 1) {
    problems.push('engine.redis.address: one address only (Redis sharding is not supported)');
    return null;
  }
  // Centrifugo takes `host:port` as well as a redis:// URL.
  const address = addresses[0]!;
  const url = /^rediss?:\/\//.test(address) ? address : `redis://${address}`;
  return { url, ...credentials, ...prefix };
}

/** Unknown keys by path, and values of the wrong type, in the order TypeBox finds them. */
function configProblems(config: unknown): string[] {
  const problems: string[] = [];
  for (const error of Value.Errors(configSchema, config)) {
    const path = error.instancePath.replace(/^\//, '').replaceAll('/', '.');
    if (error.keyword === 'additionalProperties') {
      const keys = (error.params as { additionalProperties: string[] }).additionalProperties;
      for (const key of keys) problems.push(`unknown key ${path ? `${path}.` : ''}${key}`);
    } else if (error.keyword !== 'boolean') problems.push(`${path || 'config'}: ${error.message}`);
  }
  return [...new Set(problems)];
}

function channelOptions(raw: CentrifugoChannelOptions, problems: string[], where: string): ChannelOptions {
  const ttlMs = raw.history_ttl === undefined ? 0 : durationMs(raw.history_ttl);
  if (Number.isNaN(ttlMs)) problems.push(`${where}.history_ttl: not a duration (e.g. "300s")`);
  return {
    presence: raw.presence === true,
    joinLeave: raw.join_leave === true,
    forcePushJoinLeave: raw.force_push_join_leave === true,
    allowSubscribeForClient: raw.allow_subscribe_for_client === true,
    allowSubscribeForAnonymous: raw.allow_subscribe_for_anonymous === true,
    allowPublishForClient: raw.allow_publish_for_client === true,
    allowPublishForSubscriber: raw.allow_publish_for_subscriber === true,
    allowPublishForAnonymous: raw.allow_publish_for_anonymous === true,
    allowPresenceForClient: raw.allow_presence_for_client === true,
    allowPresenceForSubscriber: raw.allow_presence_for_subscriber === true,
    allowPresenceForAnonymous: raw.allow_presence_for_anonymous === true,
    allowHistoryForClient: raw.allow_history_for_client === true,
    allowHistoryForSubscriber: raw.allow_history_for_subscriber === true,
    allowHistoryForAnonymous: raw.allow_history_for_anonymous === true,
    historySize: raw.history_size ?? 0,
    historyTtlMs: ttlMs,
    forceRecovery: raw.force_recovery === true,
  };
}

const unitMs: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Go's time.ParseDuration (units ns to h, e.g. "1h30m", "0.5s"), or nanoseconds as a number; NaN if bad. */
export function durationMs(value: string | number): number {
  if (typeof value === 'number') return value / 1e6;
  if (value === '0') return 0;
  const parts = [...value.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== value) return Number.NaN;
  return parts.reduce((total, [, amount, unit]) => total + Number(amount) * unitMs[unit!]!, 0);
}
