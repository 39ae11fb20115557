import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import {
  CentrifugoConfigError,
  Gateway,
  type GatewayConfig,
  type GatewayOptions,
  type HistoryOptions,
  RedisEngine,
  type RedisTarget,
  readCentrifugoConfig,
} from '@tdp/gateway';
import { derivedKey } from '../../adapters/outbound/tokens/executionCredentials.ts';
import { type Keyring, parseKeyring } from '../../core/identity/secretBox.ts';
import { ConfigError } from '../../host/settings.ts';
import {
  defaultRealtimeSettings,
  type RealtimeSettings,
  realtimeTokenSecretFrom,
  redisSentinelFrom,
} from './settings.ts';

export { realtimeTokenSecretFrom };

/**
 * History kept per channel: enough for a page that was away for a few minutes to catch up. Channels of
 * one task or one workflow (a new one per task) keep it only while followed: a first subscriber loads
 * a snapshot anyway, and kept for everyone they held every task's changes for ten minutes (at 100
 * tasks/s, tens of thousands of channels in the server's heap). The rest — a person's, project's or
 * role's channel, and the tenant's and the system's broadcasts — keep theirs for whoever comes back.
 */
export const channelHistory =
  ({ size, followedSize, ttlMs }: RealtimeSettings['realtimeHistory']) =>
  (channel: string): HistoryOptions =>
    channel.startsWith('task_detail:') || channel.startsWith('workflow_summary:')
      ? { size: followedSize, ttlMs, whileFollowed: true }
      : { size, ttlMs };

/**
 * The realtime gateway as `tdp server` and `tdp gateway` run it: channels in memory, or in Redis when
 * REDIS_URL, or REDIS_SENTINELS and REDIS_SENTINEL_MASTER, are set (then any number of gateway nodes
 * serve the same channels).
 */
export function createGateway(
  config: Pick<
    RealtimeSettings,
    | 'redisUrl'
    | 'redisSentinel'
    | 'gatewayApiKey'
    | 'realtimeJwksUrl'
    | 'realtimeHistory'
    | 'taskDetailSubscriptionLimit'
    | 'realtimeClientQueue'
  > & {
    /** Redis keys' prefix (a Centrifugo config's `engine.redis.prefix`; default the gateway's own). */
    redisPrefix?: string;
    /** How deep clients' JSON may nest (the server's `TDP_JSON_MAX_DEPTH`; default the gateway's, 64). */
    jsonMaxDepth?: number;
  },
  hmacKey: Uint8Array | string,
  now: () => number,
  /** From a Centrifugo config (`tdp gateway --config`): its namespaces, history and client options. */
  fromConfig: Omit<GatewayOptions, 'hmacKey'> = {},
  /** Told of slow clients' coalesced messages and disconnects (the server's metrics). */
  observer?: GatewayOptions['observer'],
): Gateway {
  let gateway: Gateway | null = null;
  const history = fromConfig.history ?? channelHistory(config.realtimeHistory);
  const target: RedisTarget | null =
    config.redisSentinel ?? (config.redisUrl ? { url: config.redisUrl } : null);
  const engine = target
    ? new RedisEngine({
        ...target,
        ...(config.redisPrefix ? { prefix: config.redisPrefix } : {}),
        history,
        now,
        onResync: () => gateway?.resync(),
      })
    : undefined;
  gateway = new Gateway({
    ...fromConfig,
    hmacKey,
    now,
    history,
    ...(engine ? { engine } : {}),
    ...(config.gatewayApiKey ? { apiKey: config.gatewayApiKey } : {}),
    ...(config.realtimeJwksUrl ? { jwksUrl: config.realtimeJwksUrl } : {}),
    // A page follows at most a few task details at once: each costs the server a channel's history.
    channelLimits: [{ prefix: 'task_detail:', max: config.taskDetailSubscriptionLimit }],
    clientQueue: config.realtimeClientQueue,
    ...(config.jsonMaxDepth !== undefined ? { jsonMaxDepth: config.jsonMaxDepth } : {}),
    ...(observer ? { observer } : {}),
  });
  return gateway;
}

/**
 * The key of realtime tokens: the shared secret when one is set (`TDP_REALTIME_TOKEN_SECRET`, the bytes
 * Centrifugo's `hmac_secret_key` is), else derived from the keyring, so `tdp server` and `tdp gateway` agree.
 */
export const realtimeTokenKey = (keyring: Keyring | null, secret: string | null = null): Uint8Array => {
  if (secret) return new TextEncoder().encode(secret);
  if (!keyring) throw new ConfigError('realtime tokens need TDP_SECRET_KEYS or TDP_REALTIME_TOKEN_SECRET');
  return derivedKey(keyring, keyring.activeKeyId, 'realtime-token');
};

/** A Centrifugo v6 JSON config file read for `tdp gateway --config` (ConfigError naming what is wrong). */
export async function readGatewayConfigFile(path: string): Promise<GatewayConfig> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(path, 'utf8'));
  } catch (error) {
    throw new ConfigError(`--config ${path}: not a readable JSON file (${(error as Error).message})`);
  }
  try {
    return readCentrifugoConfig(parsed);
  } catch (error) {
    if (error instanceof CentrifugoConfigError)
      throw new ConfigError(`--config ${path}: ${error.problems.join('; ')}`);
    throw error;
  }
}

/**
 * `tdp gateway`: the gateway on its own port, for deployments that run it apart from the server (the
 * server then publishes through its API: CENTRIFUGO_API_URL=http://<gateway>/api with the same key).
 * Needs TDP_GATEWAY_API_KEY and the token key: TDP_REALTIME_TOKEN_SECRET, or TDP_SECRET_KEYS (the
 * server's, the key is derived from them), unless the Centrifugo config of `--config` gives
 * `client.token.hmac_secret_key` and `http_api.key`; REDIS_URL or REDIS_SENTINELS (or the config's
 * `engine` of type `redis`) for several nodes.
 */
export async function startGatewayServer(
  env: NodeJS.ProcessEnv,
  options: { configPath?: string } = {},
): Promise<{ url: string; close(): Promise<void> }> {
  const config = options.configPath
    ? await readGatewayConfigFile(options.configPath)
    : ({ options: {}, listen: {} } as GatewayConfig);
  const { hmacKey: configKey, apiKey: configApiKey, ...fromConfig } = config.options;
  const keys = env.TDP_SECRET_KEYS?.trim();
  const tokenSecret = realtimeTokenSecretFrom(env.TDP_REALTIME_TOKEN_SECRET);
  const apiKey = env.TDP_GATEWAY_API_KEY?.trim() || configApiKey;
  if (!keys && !configKey && !tokenSecret)
    throw new ConfigError(
      'TDP_SECRET_KEYS is required (the same keys as the server), or TDP_REALTIME_TOKEN_SECRET, or client.token.hmac_secret_key in --config',
    );
  if (!apiKey)
    throw new ConfigError(
      'TDP_GATEWAY_API_KEY is required (the key of the server API), or http_api.key in --config',
    );
  let hmacKey: Uint8Array | string;
  if (configKey) hmacKey = configKey;
  else if (tokenSecret) hmacKey = realtimeTokenKey(null, tokenSecret);
  else {
    try {
      hmacKey = realtimeTokenKey(parseKeyring(keys!));
    } catch (error) {
      throw new ConfigError(`TDP_SECRET_KEYS: ${(error as Error).message}`);
    }
  }
  // The environment's Redis wins over the config's (REDIS_URL or REDIS_SENTINELS, not both).
  const redisUrl = env.REDIS_URL?.trim() || null;
  const redisSentinel = redisSentinelFrom(env) ?? null;
  if (redisUrl && redisSentinel) throw new ConfigError('set REDIS_URL or REDIS_SENTINELS, not both');
  const { prefix: redisPrefix, ...configRedis } = config.redis ?? {};
  const fromEnv = Boolean(redisUrl || redisSentinel);
  const gateway = createGateway(
    {
      redisUrl: redisUrl ?? (!fromEnv && 'url' in configRedis ? configRedis.url : null),
      redisSentinel: redisSentinel ?? (!fromEnv && 'sentinels' in configRedis ? configRedis : null),
      ...(redisPrefix ? { redisPrefix } : {}),
      gatewayApiKey: apiKey,
      realtimeJwksUrl: env.TDP_REALTIME_JWKS_URL?.trim() || fromConfig.jwksUrl || null,
      realtimeHistory: defaultRealtimeSettings.realtimeHistory,
      taskDetailSubscriptionLimit: defaultRealtimeSettings.taskDetailSubscriptionLimit,
      realtimeClientQueue: defaultRealtimeSettings.realtimeClientQueue,
    },
    hmacKey,
    Date.now,
    fromConfig,
  );
  await gateway.ready;
  const server = createServer((request, response) => {
    if (gateway.handleHttp(request, response)) return;
    if (request.url === '/healthz') response.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    else response.writeHead(404).end();
  });
  gateway.attach(server);
  const port = Number(env.TDP_GATEWAY_PORT ?? config.listen.port ?? 8000);
  if (!Number.isInteger(port) || port < 0) throw new ConfigError('TDP_GATEWAY_PORT must be a port number');
  const host = env.TDP_HOST ?? (config.listen.address || '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const address = server.address() as { port: number };
  return {
    url: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${address.port}`,
    close: async () => {
      await gateway.close();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
