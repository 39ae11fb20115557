/**
 * Durable worker commands and how they reach a worker. A command (START_ATTEMPT, CANCEL_ATTEMPT, DRAIN)
 * is a row written in the fact transaction that decided it; the worker's open command stream sends it
 * and sends it again every `resendAfterMs` until the worker acknowledges it. Three paths feed a stream:
 * - the hub: commands this process just committed, handed over as they are (no read back);
 * - a wake-up from the hub (`notify`) or the poll: the worker's open commands read from the database —
 *   how commands another server replica committed arrive;
 * - (re)connect: every command still unacknowledged is sent on the stream's first read. A cursor such as
 *   `Last-Event-ID` cannot say what a worker missed: ids are not committed in order (another replica's
 *   command may carry a lower id than one already delivered), so comparing them skipped commands until
 *   the re-send interval. Workers keep their commands by id, so one sent twice is received once.
 */
import type { WorkerCommandRecord } from '../facts/records.ts';
import type { Clock } from '../shared/ports.ts';
import type { WorkerCommand, WorkerStore } from './ports.ts';

/** Notifies open command streams in this process that their worker has new commands. */
export class CommandHub {
  private readonly listeners = new Map<string, Set<(commands?: WorkerCommandRecord[]) => void>>();

  listen(workerId: string, listener: (commands?: WorkerCommandRecord[]) => void): () => void {
    const set = this.listeners.get(workerId) ?? new Set();
    set.add(listener);
    this.listeners.set(workerId, set);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(workerId);
    };
  }

  /** Whether a stream of this worker is open in this process. */
  holds(workerId: string): boolean {
    return this.listeners.has(workerId);
  }

  /** The workers have new commands: their streams read them from the database. */
  notify(workerIds: string[]): void {
    for (const id of workerIds) for (const listener of this.listeners.get(id) ?? []) listener();
  }

  /** Committed commands, handed to the open streams of this process as they are (no read back). */
  deliver(commands: WorkerCommandRecord[]): void {
    const byWorker = new Map<string, WorkerCommandRecord[]>();
    for (const command of commands) {
      const list = byWorker.get(command.workerId) ?? [];
      list.push(command);
      byWorker.set(command.workerId, list);
    }
    for (const [workerId, list] of byWorker)
      for (const listener of this.listeners.get(workerId) ?? []) listener(list);
  }
}

export interface CommandStreamDeps {
  store: Pick<WorkerStore, 'openCommands'>;
  hub: CommandHub;
  clock: Clock;
  /** An unacknowledged command is sent again after this long. */
  resendAfterMs: number;
  /** How often the open commands are read (commands committed by other replicas reach no hub here). */
  pollIntervalMs: number;
}

/** One worker's open command stream: decides what to send, and when; the transport writes it. */
export class CommandStream {
  private sending = Promise.resolve();
  private closed = false;
  private firstFlush = true;
  /**
   * When each unacknowledged command was last sent on this stream. Commits do not arrive in id order
   * (concurrent creates place steps too), so "sent" is remembered per id, not as a cursor.
   */
  private readonly sentAt = new Map<string, number>();
  private unlisten: () => void = () => {};
  private poll: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly deps: CommandStreamDeps,
    private readonly workerId: string,
    private readonly send: (command: WorkerCommand | WorkerCommandRecord) => void,
    private readonly onError: (error: unknown) => void,
  ) {}

  start(): void {
    this.unlisten = this.deps.hub.listen(this.workerId, (commands) =>
      commands ? this.deliver(commands) : this.flush(),
    );
    this.poll = setInterval(() => this.flush(), this.deps.pollIntervalMs);
    this.flush();
  }

  close(): void {
    this.closed = true;
    this.unlisten();
    clearInterval(this.poll);
  }

  private sendNow(command: WorkerCommand | WorkerCommandRecord, now: number): void {
    this.sentAt.set(command.id, now);
    this.send(command);
  }

  private readonly now = () => this.deps.clock.now().getTime();

  /** Reads the open commands and sends those never sent here, or sent longer ago than the interval. */
  private flush(): void {
    this.sending = this.sending
      .then(async () => {
        if (this.closed) return;
        const readAt = this.now();
        const open = await this.deps.store.openCommands(this.workerId);
        const now = this.now();
        for (const command of open) {
          const last = this.sentAt.get(command.id);
          if (last === undefined || last <= now - this.deps.resendAfterMs) this.sendNow(command, now);
        }
        this.firstFlush = false;
        // Acknowledged since: forget them (but not those written after this read began).
        const stillOpen = new Set(open.map((c) => c.id));
        for (const [id, at] of this.sentAt) if (!stillOpen.has(id) && at < readAt) this.sentAt.delete(id);
      })
      .catch(this.onError);
  }

  /** Commands this process just committed: sent as they are, no read back. */
  private deliver(commands: WorkerCommandRecord[]): void {
    const write = () => {
      if (this.closed) return;
      const now = this.now();
      try {
        for (const command of commands) if (!this.sentAt.has(command.id)) this.sendNow(command, now);
      } catch (error) {
        // A transport that fails to write must not throw into the committer, nor leave a rejection.
        this.onError(error);
      }
    };
    // Once the first read's backlog is out, at once: queued behind the periodic read, a command
    // waited for that read's round trip. `sentAt` keeps the two paths from sending one twice.
    if (!this.firstFlush) write();
    else this.sending = this.sending.then(write);
  }
}
