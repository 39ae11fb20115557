/**
 * The channels this node's sessions follow, on the engine: joining with history recovery, live delivery
 * in offset order, and sending subscribers to recover when this node fell out of step with the engine.
 */
import type { Engine, PresenceEntry, Publication, PublishOptions, StreamPosition } from './engine.ts';
import {
  closes,
  type HistoryRequest,
  type RecoverRequest,
  type ReplyError,
  replyErrors,
  wire,
} from './protocol.ts';
import type { JoinMode, Session } from './session.ts';

/** The most publications a subscribe recovers; past it the client is told it did not recover. */
const recoveryLimit = 300;

export class Channels {
  private readonly subscribers = new Map<string, Set<Session>>();
  /** Channels this node watches in the engine, and the last position seen on each (for gaps). */
  private readonly watching = new Map<string, Promise<void>>();
  private readonly lastSeen = new Map<string, StreamPosition>();

  constructor(private readonly engine: Engine) {}

  /** How many channels have subscribers on this node. */
  get count(): number {
    return this.subscribers.size;
  }

  /** Appends to the channel's history and pushes to its subscribers on every node. */
  publish(channel: string, data: unknown, options: PublishOptions): Promise<StreamPosition> {
    return this.engine.publish(channel, data, options);
  }

  /**
   * Subscribes the session (its publications are buffered until `activate`); with `recover`, the
   * publications it missed since its position. `floor` is the offset the client is at after the reply.
   */
  async join(
    session: Session,
    channel: string,
    request: RecoverRequest,
    serverSide: boolean,
    mode: JoinMode = { recoverable: true },
  ): Promise<{ reply: Record<string, unknown>; floor: number }> {
    session.subscriptions.set(channel, {
      serverSide,
      buffer: [],
      presence: mode.presence === true,
      emitJoinLeave: mode.emitJoinLeave === true,
      pushJoinLeave: mode.pushJoinLeave === true,
    });
    let set = this.subscribers.get(channel);
    if (!set) {
      set = new Set();
      this.subscribers.set(channel, set);
    }
    set.add(session);
    let watching = this.watching.get(channel);
    if (!watching) {
      watching = this.engine.watch(channel);
      this.watching.set(channel, watching);
      // A watch that failed (Redis away) is tried again by the next join, not awaited forever.
      const attempt = watching;
      attempt.catch(() => {
        if (this.watching.get(channel) === attempt) this.watching.delete(channel);
      });
    }
    await watching;
    // Before the reply, so that the client's own presence call right after finds it.
    if (mode.presence) {
      await this.engine.addPresence(channel, [presenceEntryOf(session)]);
      // It left (or ended) meanwhile: its leave found no entry to remove; this one must not stay.
      if (!session.subscriptions.has(channel)) await this.engine.removePresence(channel, session.client);
    }
    if (!mode.recoverable) {
      // Not positioned: the client keeps no offset, and `floor` only keeps buffered ones from repeating.
      const top = (await this.engine.read(channel, { limit: 0 })).position;
      return { reply: {}, floor: top.offset };
    }
    if (!request.recover) {
      const top = (await this.engine.read(channel, { limit: 0 })).position;
      return {
        reply: { recoverable: true, positioned: true, epoch: top.epoch, offset: top.offset },
        floor: top.offset,
      };
    }
    const since = request.offset ?? 0;
    const missed = await this.engine.read(channel, {
      since: { offset: since, ...(request.epoch ? { epoch: request.epoch } : {}) },
      limit: recoveryLimit,
    });
    const top = missed.position;
    const recovered =
      missed.ok &&
      (missed.publications.length === 0
        ? top.offset === since
        : missed.publications[0]!.offset === since + 1 && missed.publications.at(-1)!.offset === top.offset);
    if (recovered && missed.ok)
      return {
        reply: {
          recoverable: true,
          positioned: true,
          epoch: top.epoch,
          offset: since,
          recovered: true,
          was_recovering: true,
          ...(missed.publications.length > 0 ? { publications: missed.publications.map(wire) } : {}),
        },
        floor: top.offset,
      };
    return {
      reply: {
        recoverable: true,
        positioned: true,
        epoch: top.epoch,
        offset: top.offset,
        was_recovering: true,
      },
      floor: top.offset,
    };
  }

  /** The subscribe reply went out: publications buffered meanwhile that are newer follow it. */
  activate(session: Session, channel: string, floor: number): void {
    const subscription = session.subscriptions.get(channel);
    if (!subscription?.buffer) return;
    const newer = subscription.buffer.filter(
      ({ publication }) => publication.offset > floor || !publication.offset,
    );
    subscription.buffer = null;
    if (newer.length > 0)
      session.send(newer.map(({ publication }) => ({ push: { channel, pub: wire(publication) } })));
    if (subscription.emitJoinLeave) this.joinLeave(channel, 'join', session);
  }

  /** The channel's presence on every node (the namespace keeps presence), by client id. */
  presence(channel: string): Promise<Record<string, PresenceEntry>> {
    return this.engine.presence(channel);
  }

  /** Refreshes the presence of this node's clients, so that the engine keeps them while they stay. */
  async refreshPresence(): Promise<void> {
    for (const [channel, sessions] of this.subscribers) {
      const present = [...sessions].filter((s) => s.subscriptions.get(channel)?.presence === true);
      if (present.length > 0) await this.engine.addPresence(channel, present.map(presenceEntryOf));
    }
  }

  /** A join or leave of `who`, for the channel's subscribers on every node (through the engine). */
  private joinLeave(channel: string, kind: 'join' | 'leave', who: Session): void {
    this.engine.sendControl({ kind, channel, info: presenceEntryOf(who) }).catch(() => {});
  }

  /** A join or leave message to this node's live subscribers of the channel that get them (the joiner too). */
  deliverJoinLeave(channel: string, kind: 'join' | 'leave', info: PresenceEntry): void {
    const push = { push: { channel, [kind]: { info } } };
    for (const session of this.subscribers.get(channel) ?? []) {
      const subscription = session.subscriptions.get(channel);
      if (subscription?.pushJoinLeave && subscription.buffer === null) session.send([push]);
    }
  }

  /** The session no longer follows the channel; the last one to leave stops watching it. */
  leave(session: Session, channel: string): void {
    const subscription = session.subscriptions.get(channel);
    session.subscriptions.delete(channel);
    // Failing, the entry expires by itself (the engine keeps presence only while it is refreshed).
    if (subscription?.presence) this.engine.removePresence(channel, session.client).catch(() => {});
    const set = this.subscribers.get(channel);
    if (!set) return;
    set.delete(session);
    if (subscription?.emitJoinLeave && subscription.buffer === null)
      this.joinLeave(channel, 'leave', session);
    if (set.size > 0) return;
    this.subscribers.delete(channel);
    this.watching.delete(channel);
    this.lastSeen.delete(channel);
    this.engine.unwatch(channel).catch(() => {});
  }

  /** A publication of a watched channel, from this node or another, to its local subscribers. */
  deliver(channel: string, publication: Publication, epoch: string): void {
    const set = this.subscribers.get(channel);
    if (!set) return;
    if (publication.offset > 0) {
      const last = this.lastSeen.get(channel);
      if (last && last.epoch === epoch && publication.offset <= last.offset) return;
      this.lastSeen.set(channel, { offset: publication.offset, epoch });
      // A publication skipped ahead: this node missed some; its clients catch up from the history.
      if (last && (last.epoch !== epoch || publication.offset !== last.offset + 1)) {
        this.outOfStep(channel);
        return;
      }
    }
    const push = { push: { channel, pub: wire(publication) } };
    for (const session of set) {
      const subscription = session.subscriptions.get(channel);
      if (subscription?.buffer) subscription.buffer.push({ publication, epoch });
      else session.send([push]);
    }
  }

  /** Clients of the channel resubscribe and recover (a server-side subscription reconnects). */
  outOfStep(channel: string): void {
    for (const session of [...(this.subscribers.get(channel) ?? [])]) {
      const subscription = session.subscriptions.get(channel);
      if (!subscription) continue;
      if (subscription.serverSide) {
        session.close(closes.insufficientState);
        continue;
      }
      this.leave(session, channel);
      session.send([{ push: { channel, unsubscribe: { code: 2500, reason: 'insufficient state' } } }]);
    }
  }

  /** Every watched channel is out of step (the engine lost publications, e.g. a dropped Redis link). */
  resync(): void {
    for (const channel of [...this.subscribers.keys()]) this.outOfStep(channel);
  }

  /** A history read of at most `cap` publications (a negative limit asks for `cap`). */
  async history(
    request: HistoryRequest,
    cap: number,
  ): Promise<{ result: Record<string, unknown> } | { error: ReplyError }> {
    if (request.reverse && request.since && !request.since.offset) return { error: replyErrors.badRequest };
    const limit =
      request.limit === undefined || request.limit === 0
        ? 0
        : request.limit < 0
          ? cap
          : Math.min(request.limit, cap);
    const result = await this.engine.read(request.channel!, {
      limit,
      ...(request.since ? { since: request.since } : {}),
      ...(request.reverse ? { reverse: true } : {}),
    });
    if (!result.ok) return { error: replyErrors.unrecoverablePosition };
    return {
      result: {
        ...(result.publications.length > 0 ? { publications: result.publications.map(wire) } : {}),
        epoch: result.position.epoch,
        offset: result.position.offset,
      },
    };
  }
}

const presenceEntryOf = (session: Session): PresenceEntry => session.clientInfo();
