import { randomUUID } from 'node:crypto';
import type { PresenceEntry, Publication } from './engine.ts';
import type { Close } from './protocol.ts';

export interface Subscription {
  /** From the connection token (a gap closes the connection) or subscribed by the client. */
  serverSide: boolean;
  /** While joining: publications that arrived before the subscribe reply went out. */
  buffer: { publication: Publication; epoch: string }[] | null;
  /** The namespace keeps presence: the session counts in `presence` while subscribed. */
  presence: boolean;
  /** Others get join/leave messages when this session subscribes and leaves (namespace `join_leave`). */
  emitJoinLeave: boolean;
  /** This session gets join/leave messages of the channel (it asked, or `force_push_join_leave`). */
  pushJoinLeave: boolean;
}

/** What a subscription does besides publications (Centrifugo's namespace options; off: TDP's channels). */
export interface JoinMode {
  /** Offset and epoch in the reply, and recovery on resubscribe (Centrifugo's `force_recovery`). */
  recoverable: boolean;
  presence?: boolean;
  emitJoinLeave?: boolean;
  pushJoinLeave?: boolean;
}

/** How a session's messages reach its client. */
export interface Transport {
  /** Replies and pushes, in the bidirectional form (`{id, ...}` and `{push: ...}`). */
  send(messages: unknown[]): void;
  close(close: Close): void;
  /** Whether the client answers pings (bidirectional transports do). */
  pongs: boolean;
}

/** One client connection of this node: who it is, what it follows, and its liveness state. */
export class Session {
  readonly client = randomUUID();
  user: string | null = null;
  /** The connection token's `info`, shown to others in presence and join/leave. */
  info: unknown = undefined;
  /** The claims of the connection token (the last refreshed one): what `disconnectWhere` asks about. */
  tokenClaims: Record<string, unknown> | null = null;
  readonly subscriptions = new Map<string, Subscription>();
  readonly openedAt = Date.now();
  /** When (Date.now()) the session is closed with 3005 unless its token is refreshed; null: never. */
  expiresAt: number | null = null;
  pingSentAt: number | null = null;
  closed = false;

  /** `onEnded` forgets the session wherever this node keeps it (once, when it ends). */
  constructor(
    readonly transport: Transport,
    private readonly onEnded: (session: Session) => void,
  ) {}

  /** Replies and pushes to the client, in order (a network client's through its send queue). */
  send(messages: unknown[]): void {
    if (!this.closed) this.transport.send(messages);
  }

  /** How many channels starting with `prefix` the session follows. */
  subscriptionsTo(prefix: string): number {
    return [...this.subscriptions.keys()].filter((c) => c.startsWith(prefix)).length;
  }

  /** How others see this session in presence and join/leave (Centrifugo's ClientInfo). */
  clientInfo(): PresenceEntry {
    return {
      user: this.user ?? '',
      client: this.client,
      ...(this.info !== undefined ? { conn_info: this.info } : {}),
    };
  }

  /** Closes the connection with `close` and ends the session (nothing once it has ended). */
  close(close: Close): void {
    if (this.closed) return;
    this.transport.close(close);
    this.end();
  }

  /** The client is gone: forget its subscriptions and timers. */
  end(): void {
    if (this.closed) return;
    this.closed = true;
    this.onEnded(this);
  }
}
