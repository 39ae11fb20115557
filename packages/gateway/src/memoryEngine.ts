/**
 * The memory engine: per channel, a stream position `{offset, epoch}` and a bounded history (size and
 * TTL), as Centrifugo keeps them (../shared/CENTRIFUGO_COMPAT.md §5). The epoch is random per stream,
 * so a restarted gateway tells clients that their positions are gone instead of pretending to recover.
 */
import { randomBytes } from 'node:crypto';

export interface Publication {
  offset: number;
  data: unknown;
  /** When it was published (ms), for the history TTL. */
  at: number;
}

export interface StreamPosition {
  offset: number;
  epoch: string;
}

export interface HistoryOptions {
  size: number;
  ttlMs: number;
}

interface Stream {
  epoch: string;
  offset: number;
  publications: Publication[];
}

export type HistoryResult =
  | { ok: true; publications: Publication[]; position: StreamPosition }
  /** The epoch asked for is not the stream's: its positions are gone (error 112). */
  | { ok: false; position: StreamPosition };

const newEpoch = () =>
  randomBytes(6)
    .toString('base64')
    .replace(/[^a-zA-Z]/g, 'x')
    .slice(0, 8);

export class MemoryEngine {
  private readonly streams = new Map<string, Stream>();

  constructor(
    private readonly history: (channel: string) => HistoryOptions,
    private readonly now: () => number = Date.now,
  ) {}

  private stream(channel: string): Stream {
    let stream = this.streams.get(channel);
    if (!stream) {
      stream = { epoch: newEpoch(), offset: 0, publications: [] };
      this.streams.set(channel, stream);
    }
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

  /** Appends to the channel's stream; returns the publication with its offset. */
  publish(channel: string, data: unknown): { publication: Publication; epoch: string } {
    const stream = this.stream(channel);
    stream.offset += 1;
    const publication = { offset: stream.offset, data, at: this.now() };
    stream.publications.push(publication);
    this.trim(channel, stream);
    return { publication, epoch: stream.epoch };
  }

  position(channel: string): StreamPosition {
    const stream = this.stream(channel);
    return { offset: stream.offset, epoch: stream.epoch };
  }

  /**
   * Publications after `since` (ascending, at most `limit`; -1 for all, 0 for none), or newest first
   * with `reverse`. An epoch that is not the stream's is refused.
   */
  read(
    channel: string,
    options: { since?: Partial<StreamPosition>; limit: number; reverse?: boolean },
  ): HistoryResult {
    const stream = this.stream(channel);
    this.trim(channel, stream);
    const position = { offset: stream.offset, epoch: stream.epoch };
    if (options.since?.epoch && options.since.epoch !== stream.epoch) return { ok: false, position };
    if (options.limit === 0) return { ok: true, publications: [], position };
    const since = options.since?.offset;
    let list = options.reverse
      ? stream.publications.filter((p) => since === undefined || p.offset < since).reverse()
      : stream.publications.filter((p) => since === undefined || p.offset > since);
    if (options.limit > 0) list = list.slice(0, options.limit);
    return { ok: true, publications: list, position };
  }
}
