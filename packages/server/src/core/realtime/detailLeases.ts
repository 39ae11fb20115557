/**
 * The detail limit when Centrifugo serves the browsers (docs/realtime.md): Centrifugo cannot count a
 * connection's task-detail subscriptions for TDP, so TDP's subscription-token endpoint does. Every token
 * it mints for a connection (the SDK's client id) and a detail channel holds a lease on that pair until
 * the token expires — Centrifugo ends the subscription then unless the SDK refreshes it, which asks for a
 * new token and so renews the lease. A connection is refused a 21st live lease. The leases are shared by
 * every server replica.
 */

export interface DetailLease {
  clientId: string;
  channel: string;
  /** When the token expires (and with it the subscription, unless refreshed). */
  expiresAt: Date;
}

export interface DetailLeases {
  /**
   * Takes or renews the lease unless the connection already holds `limit` live leases on other
   * channels; then answers how many it holds and changes nothing.
   */
  take(
    lease: DetailLease,
    now: Date,
    limit: number,
  ): Promise<{ taken: true } | { taken: false; held: number }>;
}
