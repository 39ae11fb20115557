/**
 * The detail limit when Centrifugo serves the browsers (docs/realtime.md): Centrifugo cannot count a
 * connection's task-detail subscriptions for TDP, so TDP's subscription-token endpoint does. Every token
 * it mints for a connection (the SDK's client id) and a detail channel holds a lease on that pair until
 * the token expires — Centrifugo ends the subscription then unless the SDK refreshes it, which asks for a
 * new token and so renews the lease. A connection is refused a 21st live lease. The leases are shared by
 * every server replica.
 *
 * Centrifugo tells nobody of an unsubscribe, so a detail the page left would hold its place until its
 * token expires. Before refusing, the leases taken a while ago are checked against Centrifugo's presence
 * of their channels (the `task_detail` namespace has presence on): those the connection is no longer in
 * are released. (Not the ones just taken: their token may not have been used yet.)
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
  /** The channels of the connection's live leases last taken or renewed before `before`. */
  settled(clientId: string, before: Date, now: Date): Promise<string[]>;
  release(clientId: string, channels: string[]): Promise<void>;
}

/** Which of `channels` the connection is subscribed to now; null when that cannot be known. */
export interface SubscriptionPresence {
  subscribed(clientId: string, channels: string[]): Promise<Set<string> | null>;
}

/** A lease this recent is not released for want of presence: its token may be on its way to the page. */
export const unusedTokenGraceMs = 30_000;

/**
 * Takes the lease; at the limit, releases the settled leases whose channel the connection has left, and
 * tries once more.
 */
export async function takeDetailLease(
  deps: { leases: DetailLeases; presence: SubscriptionPresence | null },
  lease: DetailLease,
  now: Date,
  limit: number,
): Promise<{ taken: true } | { taken: false; held: number }> {
  const first = await deps.leases.take(lease, now, limit);
  if (first.taken || !deps.presence) return first;
  const settled = await deps.leases.settled(
    lease.clientId,
    new Date(now.getTime() - unusedTokenGraceMs),
    now,
  );
  const present = await deps.presence.subscribed(lease.clientId, settled);
  if (!present) return first;
  const left = settled.filter((channel) => !present.has(channel));
  if (left.length === 0) return first;
  await deps.leases.release(lease.clientId, left);
  return deps.leases.take(lease, now, limit);
}
