/**
 * A connection's bounded send queue (source document 002 §13.3). While the socket keeps up, messages go
 * straight out; once more than `pressureBytes` wait in its buffer, they are held here instead, and a
 * held progress-only publication (one whose data names a `coalesceKey`) is replaced by a newer one of
 * the same channel and key, so a slow client gets each task's newest progress and every other message
 * (terminal, failure, creation, new attempt, revoke, action required: none carries the key). Past
 * `maxBytes` queued (the socket's buffer and what is held) the connection is closed with Centrifugo's
 * 3008 "slow", and the SDK reconnects and recovers from history.
 */

export interface SendQueueLimits {
  /** Bytes waiting in the socket past which messages are held (and progress coalesced). */
  pressureBytes: number;
  /** Bytes queued in all past which the client is disconnected as slow. */
  maxBytes: number;
}

/** Where held messages go: a socket that says how much it has not written yet. */
export interface QueueSink {
  buffered(): number;
  /** Writes `text`; `written` is called once it left the process (or failed). */
  write(text: string, written: () => void): void;
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

  /** `encode` turns messages into what the socket writes (several of them go out together). */
  constructor(
    private readonly sink: QueueSink,
    private readonly encode: (messages: unknown[]) => string,
    private readonly limits: SendQueueLimits,
    /** Closes the connection as slow (what is held is dropped). */
    private readonly onSlow: () => void,
    private readonly observer: SendQueueObserver = {},
  ) {}

  /** Bytes queued: in the socket's buffer and held here. */
  get queuedBytes(): number {
    return this.sink.buffered() + this.heldBytes;
  }

  send(messages: unknown[]): void {
    if (this.held.length === 0 && this.sink.buffered() < this.limits.pressureBytes) {
      const text = this.encode(messages);
      if (text !== '') this.write(text);
      return;
    }
    for (const message of messages) this.hold(message);
    if (this.queuedBytes > this.limits.maxBytes) {
      this.held = [];
      this.heldBytes = 0;
      this.observer.slowDisconnect?.();
      this.onSlow();
      return;
    }
    this.flush();
  }

  private hold(message: unknown): void {
    const text = this.encode([message]);
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
      while (this.held.length > 0 && this.sink.buffered() < this.limits.pressureBytes) {
        const next = this.held.shift()!;
        this.heldBytes -= next.bytes;
        this.write(next.text);
      }
    } finally {
      this.flushing = false;
    }
  }

  private write(text: string): void {
    this.sink.write(text, () => {
      if (this.held.length > 0) this.flush();
    });
  }
}
