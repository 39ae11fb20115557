/**
 * The memory engine: per channel, a stream position `{offset, epoch}` and a bounded history (size and
 * TTL), as Centrifugo keeps them (docs/design/realtime-wire-compatibility.md), for a single gateway
 * node. The epoch is random per stream, so a restarted gateway tells clients that their positions are
 * gone instead of pretending to recover.
 */
import { randomBytes } from 'node:crypto';
import {
  type ControlMessage,
  type Engine,
  type EngineHandlers,
  type HistoryOptions,
  type HistoryResult,
  idempotencyMs,
  type PresenceEntry,
  type Publication,
  type PublishOptions,
  type ReadOptions,
  type StreamPosition,
  selectHistory,
} from './engine.ts';

/** Past this many idempotency keys the cache starts over (a bound on memory, not an eviction policy). */
const idempotencyKeysMax = 100_000;

interface Stream {
  epoch: string;
  offset: number;
  publications: Publication[];
  /** Last publication or read (ms): a stream idle past the meta TTL is forgotten. */
  touchedAt: number;
  /** Subscribers on this node, and when the last one left (ms; -Infinity: never followed). */
  followers: number;
  unfollowedAt: number;
}

export const newEpoch = () =>
  randomBytes(6)
    .toString('base64')
    .replace(/[^a-zA-Z]/g, 'x')
    .slice(0, 8);

export class MemoryEngine implements Engine {
  private readonly streams = new Map<string, Stream>();
  /** One node: presence is this process's, and leaves with its clients (no expiry needed). */
  private readonly present = new Map<string, Map<string, PresenceEntry>>();
  /** Per channel and idempotency key: the first publish's result, and when. */
  private readonly idempotent = new Map<string, { at: number; result: StreamPosition }>();
  private handlers: EngineHandlers | null = null;
  private sweeper: NodeJS.Timeout | null = null;

  constructor(
    private readonly history: (channel: string) => HistoryOptions,
    private readonly now: () => number = Date.now,
    /** How long an idle channel keeps its position (Centrifugo's history_meta_ttl); then it is dropped. */
    private readonly metaTtlMs = 3600_000,
  ) {}

  async start(handlers: EngineHandlers): Promise<void> {
    this.handlers = handlers;
    // Without it every channel ever used (one per task) would stay in memory for good.
    this.sweeper = setInterval(() => this.sweep(), 60_000);
    this.sweeper.unref();
  }

  /**
   * Trims expired history everywhere and forgets channels idle past the meta TTL: a client that comes
   * back to one later is told it cannot recover (a new epoch) and reloads its snapshot.
   */
  sweep(): void {
    const now = this.now();
    for (const [channel, stream] of this.streams) {
      this.trim(channel, stream);
      if (stream.publications.length === 0 && now - stream.touchedAt > this.metaTtlMs)
        this.streams.delete(channel);
    }
  }

  /** Channels kept in memory. */
  get size(): number {
    return this.streams.size;
  }

  private stream(channel: string): Stream {
    let stream = this.streams.get(channel);
    if (!stream) {
      stream = {
        epoch: newEpoch(),
        offset: 0,
        publications: [],
        touchedAt: this.now(),
        followers: 0,
        unfollowedAt: Number.NEGATIVE_INFINITY,
      };
      this.streams.set(channel, stream);
    }
    stream.touchedAt = this.now();
    return stream;
  }

  private trim(channel: string, stream: Stream): void {
    const { size, ttlMs } = this.history(channel);
    const oldest = this.now() - ttlMs;
    while (
      stream.publications.length > 0 &&
      (stream.publications.length > size || stream.publications[0]!.at < oldest)
    )
      stream.publications.shift();
  }

  /** Appends synchronously (so publications keep their call order) and delivers at once. */
  publishNow(channel: string, data: unknown, options: { skipHistory?: boolean } = {}): StreamPosition {
    const { ttlMs, whileFollowed } = this.history(channel);
    // Kept only while followed, and nobody follows it (subscribing creates the stream, and a stream
    // outlives its last follower): no subscriber to deliver to and nothing to keep, so no stream
    // either. One per task and per workflow otherwise stayed in memory for the meta TTL.
    if (whileFollowed && !this.streams.has(channel)) return { offset: 0, epoch: '' };
    const stream = this.stream(channel);
    if (options.skipHistory) {
      this.handlers?.publication(channel, { offset: 0, data, at: this.now() }, stream.epoch);
      return { offset: 0, epoch: stream.epoch };
    }
    stream.offset += 1;
    const publication = { offset: stream.offset, data, at: this.now() };
    const followed = stream.followers > 0 || this.now() - stream.unfollowedAt <= ttlMs;
    if (!whileFollowed || followed) stream.publications.push(publication);
    this.trim(channel, stream);
    this.handlers?.publication(channel, publication, stream.epoch);
    return { offset: publication.offset, epoch: stream.epoch };
  }

  async publish(channel: string, data: unknown, options: PublishOptions = {}) {
    if (!options.idempotencyKey) return this.publishNow(channel, data, options);
    const key = `${channel}\n${options.idempotencyKey}`;
    const known = this.idempotent.get(key);
    if (known && this.now() - known.at < idempotencyMs) return known.result;
    const result = this.publishNow(channel, data, options);
    if (this.idempotent.size >= idempotencyKeysMax) this.idempotent.clear();
    this.idempotent.set(key, { at: this.now(), result });
    return result;
  }

  readNow(channel: string, options: ReadOptions): HistoryResult {
    const stream = this.stream(channel);
    this.trim(channel, stream);
    return selectHistory(stream.publications, { offset: stream.offset, epoch: stream.epoch }, options);
  }

  async read(channel: string, options: ReadOptions): Promise<HistoryResult> {
    return this.readNow(channel, options);
  }

  async watch(channel: string): Promise<void> {
    this.stream(channel).followers += 1;
  }

  async unwatch(channel: string): Promise<void> {
    const stream = this.streams.get(channel);
    if (!stream || stream.followers === 0) return;
    stream.followers -= 1;
    if (stream.followers === 0) stream.unfollowedAt = this.now();
  }

  async sendControl(message: ControlMessage): Promise<void> {
    this.handlers?.control(message);
  }

  async addPresence(channel: string, entries: PresenceEntry[]): Promise<void> {
    let clients = this.present.get(channel);
    if (!clients) {
      clients = new Map();
      this.present.set(channel, clients);
    }
    for (const entry of entries) clients.set(entry.client, entry);
  }

  async removePresence(channel: string, client: string): Promise<void> {
    const clients = this.present.get(channel);
    clients?.delete(client);
    if (clients?.size === 0) this.present.delete(channel);
  }

  async presence(channel: string): Promise<Record<string, PresenceEntry>> {
    return Object.fromEntries(this.present.get(channel) ?? []);
  }

  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
  }
}
