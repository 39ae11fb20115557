/**
 * A connection's bounded send queue (docs/realtime.md, "Slow clients"), the one send path of every network
 * transport (WebSocket, uni SSE, and the SSE and HTTP-stream emulation): the transport only encodes and
 * writes bytes and says how many its socket has not sent yet (a `Wire`). While the socket keeps up,
 * messages go straight out; once more than `pressureBytes` wait unsent, they are held here instead, and a
 * held progress-only publication (one whose data names a `coalesceKey`) is replaced by a newer one of
 * the same channel and key, so a slow client gets each task's newest progress and every other message
 * (terminal, failure, creation, new attempt, revoke, action required: none carries the key). Past
 * `maxBytes` queued (unsent in the socket, plus held) the connection is closed with Centrifugo's
 * 3008 "slow", and the SDK reconnects and recovers from history.
 *
 * The unsent count is the socket's own (what the kernel has not taken yet), not the bytes whose write
 * callback is still due: those callbacks come a tick late even when the kernel took the bytes at once,
 * so a client that reads everything would look slow to a publisher that writes in bursts.
 */
import type { Close } from './protocol.ts';

export interface SendQueueLimits {
  /** Bytes waiting in the socket past which messages are held (and progress coalesced). */
  pressureBytes: number;
  /** Bytes queued in all past which the client is disconnected as slow. */
  maxBytes: number;
}

/** Centrifugo's defaults: a 1 MiB client queue, a 1 s write timeout. */
export const defaultClientQueue = { pressureBytes: 64 * 1024, maxBytes: 1024 * 1024, closeGraceMs: 1_000 };

/** What a network transport supplies: its framing, and writing bytes to its socket. */
export interface Wire {
  /** Whether the client answers pings (bidirectional transports do). */
  pongs: boolean;
  /** The transport's framing of messages written together ('' when none of them goes on this wire). */
  encode(messages: unknown[]): string;
  /** Writes `text`; `written` is called once it left the process (or the write failed). */
  write(text: string, written: () => void): void;
  /** Bytes written and not yet taken by the socket (0: drained). */
  unsent(): number;
  /** Ends the connection with `close` (a close frame, or a disconnect message and the end of a stream). */
  close(close: Close): void;
  /** Drops the connection at once (a slow client that does not read even its close). */
  cut(): void;
}

export interface SendQueueObserver {
  /** A held progress publication was replaced by a newer one of the same task. */
  coalesced?(): void;
  /** A client was disconnected for reading too slowly. */
  slowDisconnect?(): void;
}

/** The coalescing key of a protocol message: a publication push whose data carries `coalesceKey`. */
export function coalesceKeyOf(message: unknown): string | null {
  const push = (message as { push?: { channel?: string; pub?: { data?: unknown } } }).push;
  const key = (push?.pub?.data as { coalesceKey?: unknown } | null | undefined)?.coalesceKey;
  return typeof key === 'string' && push?.channel ? `${push.channel}\n${key}` : null;
}

interface Held {
  text: string;
  bytes: number;
  coalesceKey: string | null;
}

export class SendQueue {
  private held: Held[] = [];
  private heldBytes = 0;
  private flushing = false;
  private stopped = false;

  constructor(
    private readonly wire: Pick<Wire, 'encode' | 'write' | 'unsent'>,
    private readonly limits: SendQueueLimits,
    /** Closes the connection as slow (what is held is dropped). */
    private readonly onSlow: () => void,
    private readonly observer: SendQueueObserver = {},
  ) {}

  /** Bytes queued: unsent in the socket, and held here. */
  get queuedBytes(): number {
    return this.wire.unsent() + this.heldBytes;
  }

  send(messages: unknown[]): void {
    if (this.stopped) return;
    if (this.held.length === 0 && this.wire.unsent() < this.limits.pressureBytes) {
      const text = this.wire.encode(messages);
      if (text !== '') this.write(text);
      return;
    }
    for (const message of messages) this.hold(message);
    if (this.queuedBytes > this.limits.maxBytes) {
      this.stopped = true;
      this.held = [];
      this.heldBytes = 0;
      this.observer.slowDisconnect?.();
      this.onSlow();
      return;
    }
    this.flush();
  }

  private hold(message: unknown): void {
    const text = this.wire.encode([message]);
    if (text === '') return;
    const coalesceKey = coalesceKeyOf(message);
    if (coalesceKey !== null) {
      const older = this.held.findIndex((m) => m.coalesceKey === coalesceKey);
      if (older >= 0) {
        // The newest goes last: it has the channel's highest offset, so the held order stays by offset.
        this.heldBytes -= this.held[older]!.bytes;
        this.held.splice(older, 1);
        this.observer.coalesced?.();
      }
    }
    const bytes = Buffer.byteLength(text);
    this.held.push({ text, bytes, coalesceKey });
    this.heldBytes += bytes;
  }

  /** Moves held messages to the socket while its buffer is under the pressure mark. */
  private flush(): void {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.held.length > 0 && this.wire.unsent() < this.limits.pressureBytes) {
        const next = this.held.shift()!;
        this.heldBytes -= next.bytes;
        this.write(next.text);
      }
    } finally {
      this.flushing = false;
    }
  }

  private write(text: string): void {
    this.wire.write(text, () => {
      if (this.held.length > 0 && !this.stopped) this.flush();
    });
  }
}
