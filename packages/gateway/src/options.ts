import type { Engine, HistoryOptions } from './engine.ts';
import type { SendQueueLimits, SendQueueObserver } from './sendQueue.ts';

export interface GatewayOptions {
  /** HMAC key of connection and subscription tokens (HS256/384/512). */
  hmacKey: Uint8Array | string;
  /** A JWKS URL: tokens signed with RS256/ES256 (and the other RSA/EC/EdDSA algorithms) by its keys. */
  jwksUrl?: string;
  /** Tokens must carry this `aud` (Centrifugo's `token_audience`); unchecked when unset. */
  audience?: string;
  /** Tokens must carry this `iss` (Centrifugo's `token_issuer`); unchecked when unset. */
  issuer?: string;
  /** The key of the HTTP server API (`/api/<method>`); without one the API answers 404. */
  apiKey?: string;
  /** History per channel (default: 100 publications for 10 minutes). */
  history?: (channel: string) => HistoryOptions;
  /** Where channels live (default: this process's memory). */
  engine?: Engine;
  pingIntervalMs?: number;
  /** A client told to answer pings that stays silent this long after one is closed with 3012. */
  pongTimeoutMs?: number;
  /** How long after its token expired an unrefreshed connection is closed with 3005. */
  expiredCloseDelayMs?: number;
  now?: () => number;
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
