/**
 * The committed-projection follower: with Centrifugo serving the browsers, the relay publishes there
 * only, so each server replica feeds its own gateway — the one its native task streams
 * (`GET /v1/me/task-stream`) and watch sets read — from the realtime rows every replica committed. It
 * reads by snapshot windows: everything that became visible between the last snapshot and a new one, in
 * pages, then moves on. A row reaches this replica's streams once, whichever replica wrote it, and
 * whether or not the relay has published it to Centrifugo yet (both come from the same commit).
 *
 * Reading every committed row costs PostgreSQL and this process for every change, so a replica nobody
 * listens to (no client on its gateway since it started, or for `idleAfterMs`) only moves its start to
 * what is committed now.
 * The grace keeps a stream's reconnect within it resumable; a stream that comes back later is told to
 * reset (`stream.reset`), as on another replica.
 */
import type { RealtimeMessage, RealtimePublisher } from './relay.ts';

/** What became visible after `since` and by `upTo` (PostgreSQL snapshots), read after `after`. */
export interface CommittedWindow {
  since: string;
  upTo: string;
  after: { writtenBy: string; id: string } | null;
}

export interface CommittedProjectionReads {
  /** The snapshot of now: what is committed so far. */
  snapshot(): Promise<string>;
  /** The window's rows (each a commit's messages, in order) in a stable order (writer, then id), at most `limit`. */
  committed(
    window: CommittedWindow,
    limit: number,
  ): Promise<
    { writtenBy: string; id: string; messages: { id: string; channel: string; payload: unknown }[] }[]
  >;
}

export class CommittedProjectionFollower {
  /** Null until the first round: the follower starts at what is committed when it starts. */
  private since: string | null = null;
  private window: CommittedWindow | null = null;

  constructor(
    private readonly deps: {
      reads: CommittedProjectionReads;
      /** This replica's gateway. */
      local: RealtimePublisher;
      batchSize: number;
      /** A message the local gateway refused (the page moves on: a retry would not mend it). */
      onRefused?: (error: string) => void;
      /** Whether a client (a task stream) is on this replica's gateway now; absent: always. */
      listening?: () => boolean;
      /** How long after the last client the follower keeps reading. */
      idleAfterMs?: number;
      now?: () => number;
    },
  ) {}

  /**
   * When a client was last seen on the gateway; null until the first one: a replica that nobody has
   * listened to since it started has no stream to resume, so it reads nothing until one comes.
   */
  private lastListenedAt: number | null = null;

  private idle(): boolean {
    if (!this.deps.listening) return false;
    const now = (this.deps.now ?? Date.now)();
    if (this.deps.listening()) {
      this.lastListenedAt = now;
      return false;
    }
    return this.lastListenedAt === null || now - this.lastListenedAt > (this.deps.idleAfterMs ?? 0);
  }

  /** Starts at what is committed now (before this replica serves its first stream). */
  async begin(): Promise<void> {
    this.since ??= await this.deps.reads.snapshot();
  }

  /** One page; returns how many rows it delivered (a full page means more are waiting). */
  async round(): Promise<number> {
    if (this.since === null) {
      await this.begin();
      return 0;
    }
    if (this.idle()) {
      // Nobody to deliver to: what commits until a client comes starts after this snapshot. Looked at
      // again once it is taken: a client that came meanwhile may have read its state before it.
      const snapshot = await this.deps.reads.snapshot();
      if (this.idle()) {
        this.since = snapshot;
        this.window = null;
        return 0;
      }
    }
    this.window ??= { since: this.since, upTo: await this.deps.reads.snapshot(), after: null };
    const rows = await this.deps.reads.committed(this.window, this.deps.batchSize);
    if (rows.length > 0) {
      const messages: RealtimeMessage[] = rows.flatMap((row) =>
        row.messages.map((message) => ({ id: message.id, channel: message.channel, data: message.payload })),
      );
      const outcomes = await this.deps.local.publish(messages);
      for (const outcome of outcomes) if (!outcome.ok) this.deps.onRefused?.(outcome.error);
    }
    const last = rows.at(-1);
    if (last && rows.length === this.deps.batchSize)
      this.window = { ...this.window, after: { writtenBy: last.writtenBy, id: last.id } };
    else {
      this.since = this.window.upTo;
      this.window = null;
    }
    return rows.length;
  }
}
