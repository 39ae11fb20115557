import type { Engine, HistoryOptions } from './engine.ts';
import type { SendQueueLimits, SendQueueObserver } from './sendQueue.ts';

/**
 * A channel namespace's options, named after Centrifugo's (`channel.namespaces[]` in its v6 config).
 * Everything is off unless set, as in Centrifugo.
 */
export interface ChannelOptions {
  /** Keep who is subscribed (the `presence` and `presence_stats` commands; 108 when off). */
  presence?: boolean;
  /** Send join and leave messages (to subscriptions that asked for them with `join_leave`). */
  joinLeave?: boolean;
  /** Send join and leave messages to every subscription, asked or not. */
  forcePushJoinLeave?: boolean;
  /** Subscribe without a subscription token (users with an id, and anonymous ones with the next). */
  allowSubscribeForClient?: boolean;
  allowSubscribeForAnonymous?: boolean;
  /** Publish from the client: any connection, or only a subscribed one (103 otherwise). */
  allowPublishForClient?: boolean;
  allowPublishForSubscriber?: boolean;
  allowPublishForAnonymous?: boolean;
  /** Call `presence`/`presence_stats`: any connection, or only a subscribed one (103 otherwise). */
  allowPresenceForClient?: boolean;
  allowPresenceForSubscriber?: boolean;
  allowPresenceForAnonymous?: boolean;
  /** Call `history`: any connection, or only a subscribed one (103 otherwise; Centrifugo's rule). */
  allowHistoryForClient?: boolean;
  allowHistoryForSubscriber?: boolean;
  allowHistoryForAnonymous?: boolean;
  /** History kept per channel; none unless both are above 0. */
  historySize?: number;
  historyTtlMs?: number;
  /** Subscriptions are recoverable (offset and epoch in the reply, recovery on resubscribe). */
  forceRecovery?: boolean;
}

/** Channel options as Centrifugo resolves them: a channel `ns:rest` takes namespace `ns`'s. */
export interface ChannelNamespaces {
  /** Options of channels without a `:` (Centrifugo's `channel.without_namespace`). */
  withoutNamespace: ChannelOptions;
  namespaces: Record<string, ChannelOptions>;
}

export interface GatewayOptions {
  /** HMAC key of connection and subscription tokens (HS256/384/512). */
  hmacKey: Uint8Array | string;
  /** A JWKS URL: tokens signed with RS256/ES256 (and the other RSA/EC/EdDSA algorithms) by its keys. */
  jwksUrl?: string;
  /** Tokens must carry this `aud` (Centrifugo's `token_audience`); unchecked when unset. */
  audience?: string;
  /** Tokens must carry this `iss` (Centrifugo's `token_issuer`); unchecked when unset. */
  issuer?: string;
  /** Tokens without `exp` are refused (Centrifugo accepts them: a token that never dies). */
  requireExpiry?: boolean;
  /**
   * A last word on a token whose signature and times are good (e.g. is the key that minted it still
   * usable?): false refuses it like a bad token. Asked on connect, subscribe and each refresh.
   */
  acceptToken?: (claims: Record<string, unknown>) => Promise<boolean>;
  /** The key of the HTTP server API (`/api/<method>`); without one the API answers 404. */
  apiKey?: string;
  /**
   * Centrifugo's `client.insecure`: a connection without a token is accepted as anonymous (user ""),
   * token expiry is ignored, and any client may subscribe, publish and call presence on any channel.
   * Never in production.
   */
  insecure?: boolean;
  /** Centrifugo's `client.allow_anonymous_connect_without_token`: no token connects as user "". */
  allowAnonymousConnectWithoutToken?: boolean;
  /**
   * Per-namespace channel options; a channel of a namespace not listed is refused with 102. Unset:
   * every channel is known, recoverable, with history by `history`, and nothing else allowed (TDP's
   * own channels: subscribed only with tokens, published only by the server).
   */
  channels?: ChannelNamespaces;
  /** History per channel (default: 100 publications for 10 minutes; from `channels` when given). */
  history?: (channel: string) => HistoryOptions;
  /** Where channels live (default: this process's memory). */
  engine?: Engine;
  pingIntervalMs?: number;
  /**
   * How often this node refreshes its clients' presence in the engine (Centrifugo's
   * client.presence_update_interval, 25 s); the Redis engine's entries expire unless refreshed.
   */
  presenceUpdateIntervalMs?: number;
  /** A client told to answer pings that stays silent this long after one is closed with 3012. */
  pongTimeoutMs?: number;
  /** How long after its token expired an unrefreshed connection is closed with 3005. */
  expiredCloseDelayMs?: number;
  /** A connection that has not sent `connect` this long after it opened is closed with 3502 (10 s). */
  connectTimeoutMs?: number;
  now?: () => number;
  /**
   * Centrifugo's `client.allowed_origins`: a connection (WebSocket handshake, SSE, HTTP stream,
   * emulation) whose `Origin` matches none of these patterns (`*` any characters) is refused with 403;
   * one without `Origin` (not a browser) passes; an empty list lets only those pass. Unset: no check.
   */
  allowedOrigins?: string[];
  /** Centrifugo's `channel.max_length`: a longer channel in a client's subscribe is error 107. */
  channelMaxLength?: number;
  /**
   * JSON a client sends (commands, connect requests, emulation and server API bodies) may nest objects
   * and arrays this deep (default 64); deeper, or with an unpaired surrogate in a string or key, it is a
   * bad request: the connection is closed with 3501 and a reason naming the code (`JSON_TOO_DEEP`,
   * `JSON_UNPAIRED_SURROGATE`), an HTTP request answered 400 (`@tdp/protocol`'s jsonLimits.ts).
   */
  jsonMaxDepth?: number;
  /** Centrifugo's `health.enabled`: `GET /health` answers 200 `{}`. */
  health?: boolean;
  /** At most `max` subscriptions per connection to channels starting with `prefix` (error 106 past it). */
  channelLimits?: { prefix: string; max: number }[];
  /**
   * Each WebSocket or SSE connection's send queue (sendQueue.ts): held and coalesced past
   * `pressureBytes`, closed with 3008 past `maxBytes` (Centrifugo's `client_queue_max_size`, 1 MiB by
   * default), and cut `closeGraceMs` later if the client did not read as far as the close.
   */
  clientQueue?: SendQueueLimits & { closeGraceMs: number };
  /** Hears of coalesced publications and slow-client disconnects (e.g. for metrics). */
  observer?: SendQueueObserver;
  /** This node's name in `info`. */
  name?: string;
}
