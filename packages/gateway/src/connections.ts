/**
 * The sessions of this node, by client id, and their liveness: server pings, and closing a client that
 * was told to answer them and stays silent, that never sent `connect`, or whose token expired
 * unrefreshed. One sweep checks all three, so an idle connection holds no timer of its own.
 */
import type { Channels } from './channels.ts';
import type { GatewayOptions } from './options.ts';
import { closes } from './protocol.ts';
import { Session, type Transport } from './session.ts';

export class Connections {
  private readonly sessions = new Map<string, Session>();
  private readonly pinger: NodeJS.Timeout;
  private readonly pongChecker: NodeJS.Timeout;

  /** Starts pinging at once; `close` stops it. */
  constructor(
    private readonly channels: Channels,
    options: Pick<GatewayOptions, 'pingIntervalMs' | 'pongTimeoutMs' | 'connectTimeoutMs'>,
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
  }

  /** A new session on `transport`, known here until it ends. */
  open(transport: Transport): Session {
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
      session.transport.send([{}]);
      if (session.transport.pongs && session.pingSentAt === null) session.pingSentAt = now;
    }
  }
}
