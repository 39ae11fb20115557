/**
 * The sessions of this node, by client id, and their liveness: server pings, and closing a client that
 * was told to answer them and stays silent, that never sent `connect`, or whose token expired
 * unrefreshed. One sweep checks all three, so an idle connection holds no timer of its own. A network
 * connection's messages all go through its bounded send queue (sendQueue.ts), whatever its transport.
 */
import type { Channels } from './channels.ts';
import type { GatewayOptions } from './options.ts';
import { closes } from './protocol.ts';
import { defaultClientQueue, SendQueue, type Wire } from './sendQueue.ts';
import { Session, type Transport } from './session.ts';

export class Connections {
  private readonly sessions = new Map<string, Session>();
  private readonly pinger: NodeJS.Timeout;
  private readonly pongChecker: NodeJS.Timeout;
  private readonly presenceRefresher: NodeJS.Timeout;

  /** Starts pinging at once; `close` stops it. */
  constructor(
    private readonly channels: Channels,
    private readonly options: Pick<
      GatewayOptions,
      | 'pingIntervalMs'
      | 'pongTimeoutMs'
      | 'connectTimeoutMs'
      | 'clientQueue'
      | 'observer'
      | 'presenceUpdateIntervalMs'
    >,
  ) {
    this.pinger = setInterval(() => this.ping(), options.pingIntervalMs ?? 25_000);
    this.pinger.unref();
    const pongTimeout = options.pongTimeoutMs ?? 8_000;
    const connectTimeout = options.connectTimeoutMs ?? 10_000;
    this.pongChecker = setInterval(
      () => {
        const now = Date.now();
        for (const session of this.sessions.values()) {
          if (session.pingSentAt !== null && now - session.pingSentAt > pongTimeout)
            session.close(closes.noPong);
          else if (session.user === null && now - session.openedAt > connectTimeout)
            session.close(closes.stale);
          else if (session.expiresAt !== null && now >= session.expiresAt) session.close(closes.expired);
        }
      },
      Math.min(1_000, pongTimeout, connectTimeout),
    );
    this.pongChecker.unref();
    this.presenceRefresher = setInterval(
      () => void this.channels.refreshPresence().catch(() => {}),
      options.presenceUpdateIntervalMs ?? 25_000,
    );
    this.presenceRefresher.unref();
  }

  /**
   * A new session of a network client on `wire`, known here until it ends. Its messages go through a
   * bounded send queue; past the bound it is closed with 3008 "slow" and cut a grace later if it does
   * not read as far as the close (as Centrifugo's write timeout does), so its buffers are freed.
   */
  open(wire: Wire): Session {
    const limits = this.options.clientQueue ?? defaultClientQueue;
    const queue = new SendQueue(wire, limits, () => session.close(closes.slow), this.options.observer);
    const session = this.openInternal({
      pongs: wire.pongs,
      send: (messages) => queue.send(messages),
      close: (close) => {
        wire.close(close);
        if (close[0] === closes.slow[0]) setTimeout(() => wire.cut(), limits.closeGraceMs).unref();
      },
    });
    return session;
  }

  /** A new session whose messages go to `transport` as they are (a client inside this process). */
  openInternal(transport: Transport): Session {
    const session = new Session(transport, (ended) => this.forget(ended));
    this.sessions.set(session.client, session);
    return session;
  }

  /** The sessions of `user` (only `client`'s when given). */
  of(user: string, client?: string): Session[] {
    if (client) {
      const session = this.sessions.get(client);
      return session?.user === user ? [session] : [];
    }
    return [...this.sessions.values()].filter((s) => s.user === user);
  }

  /**
   * Closes this node's connections whose connection token `picks` (3005, as an expired one: the SDK
   * reconnects with a new token, which is checked again); how many were closed.
   */
  disconnectWhere(picks: (claims: Record<string, unknown>) => boolean): number {
    let closed = 0;
    for (const session of [...this.sessions.values()]) {
      if (session.tokenClaims === null || !picks(session.tokenClaims)) continue;
      session.close(closes.expired);
      closed += 1;
    }
    return closed;
  }

  /** How many channels starting with `prefix` a session follows; null when it is not on this node. */
  subscriptionCount(client: string, prefix: string): number | null {
    const session = this.sessions.get(client);
    return session ? session.subscriptionsTo(prefix) : null;
  }

  /** Connections and channels on this node. */
  stats() {
    const users = new Set([...this.sessions.values()].map((s) => s.user).filter((u) => u !== null));
    let subs = 0;
    for (const session of this.sessions.values()) subs += session.subscriptions.size;
    return {
      num_clients: this.sessions.size,
      num_users: users.size,
      num_channels: this.channels.count,
      num_subs: subs,
    };
  }

  /** Stops the pings and closes every session (the gateway shuts down). */
  shutdown(): void {
    clearInterval(this.pinger);
    clearInterval(this.pongChecker);
    clearInterval(this.presenceRefresher);
    for (const session of this.sessions.values()) session.close(closes.shutdown);
  }

  private forget(session: Session): void {
    this.sessions.delete(session.client);
    for (const channel of session.subscriptions.keys()) this.channels.leave(session, channel);
  }

  private ping(): void {
    const now = Date.now();
    for (const session of this.sessions.values()) {
      if (session.user === null) continue;
      session.send([{}]);
      if (session.transport.pongs && session.pingSentAt === null) session.pingSentAt = now;
    }
  }
}
