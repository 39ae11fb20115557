/**
 * The Centrifugo v6 configuration TDP needs when Centrifugo, not the embedded gateway, serves the
 * browsers (docs/realtime.md, "Moving to Centrifugo"): the token secret TDP signs with, the server API
 * key the relay publishes with, and one namespace per channel prefix TDP publishes to, with the history
 * and recovery the embedded gateway gives the same channels. `tdp centrifugo-config` prints it, and the
 * tests start Centrifugo with it.
 */
import { channels } from '../../core/facts/projections.ts';
import { ConfigError } from '../../host/settings.ts';
import { channelHistory, realtimeTokenSecretFrom } from './gateway.ts';
import type { RealtimeSettings } from './settings.ts';

export interface CentrifugoSettings {
  /** TDP_REALTIME_TOKEN_SECRET: Centrifugo's `client.token.hmac_secret_key`. */
  tokenSecret: string;
  /** CENTRIFUGO_API_KEY: Centrifugo's `http_api.key`. */
  apiKey: string;
  realtimeHistory: RealtimeSettings['realtimeHistory'];
  /** Origins of the pages that connect (Centrifugo refuses a browser's WebSocket from any other). */
  allowedOrigins?: string[];
  /** Several Centrifugo nodes share channels and history through Redis (`prefix` keeps them apart). */
  redis?: { url: string; prefix: string } | null;
  /** Where Centrifugo listens (its default: every interface, port 8000). */
  listen?: { address: string; port: number };
}

/**
 * The namespace of every channel TDP publishes to: the part before `:` of each name `channels` makes
 * (`task_user`, `task_detail`, …), so a channel added there gets its namespace here.
 */
export function tdpChannelNamespaces(): string[] {
  const names = Object.values(channels).map((channel) =>
    typeof channel === 'string' ? channel : (channel as (...parts: string[]) => string)('t', 'a', 'p'),
  );
  return [...new Set(names.map((name) => name.slice(0, name.indexOf(':'))))];
}

/**
 * Channel names carry ids of up to 200 characters (users, projects, roles) after a tenant and an
 * application id: longer than Centrifugo's default limit of 255.
 */
const channelMaxLength = 512;

const detailNamespace = channels.detail('t', 'x').split(':')[0];

export function centrifugoConfig(settings: CentrifugoSettings): Record<string, unknown> {
  const secret = realtimeTokenSecretFrom(settings.tokenSecret);
  if (!secret)
    throw new ConfigError('TDP_REALTIME_TOKEN_SECRET is required (Centrifugo checks tokens with it)');
  if (!settings.apiKey.trim())
    throw new ConfigError('CENTRIFUGO_API_KEY is required (the relay publishes with it)');
  const history = channelHistory(settings.realtimeHistory);
  const namespaces = tdpChannelNamespaces().map((name) => {
    const kept = history(`${name}:`);
    return {
      name,
      history_size: kept.size,
      history_ttl: `${Math.ceil(kept.ttlMs / 1000)}s`,
      // A client that comes back gets what it missed, or is told it did not (then it reloads a snapshot).
      force_recovery: true,
      // The embedded gateway lets a channel's subscribers read its history; so does this.
      allow_history_for_subscriber: true,
      // TDP asks which details a connection still follows when it reaches its limit of 20.
      ...(name === detailNamespace ? { presence: true } : {}),
    };
  });
  return {
    client: {
      token: { hmac_secret_key: secret },
      allowed_origins: settings.allowedOrigins ?? [],
    },
    http_api: { key: settings.apiKey },
    channel: { max_length: channelMaxLength, namespaces },
    health: { enabled: true },
    ...(settings.redis
      ? { engine: { type: 'redis', redis: { address: [settings.redis.url], prefix: settings.redis.prefix } } }
      : {}),
    ...(settings.listen ? { http_server: settings.listen } : {}),
  };
}
