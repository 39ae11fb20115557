/** What the runtime's loops share: one stop signal, sleeps that end when it fires, and back-off. */
import type { Logger, WorkerOptions } from './options.ts';
import type { Session } from './session.ts';

/** What every part of the runtime is given. */
export interface RuntimeParts {
  options: WorkerOptions;
  logger: Logger;
  lifecycle: Lifecycle;
  session: Session;
}

/** 1 s doubling to 30 s, each wait between half and all of that (so restarted fleets spread out). */
export function backoffMs(failures: number, random: () => number = Math.random, ceilingMs = 30_000): number {
  const ceiling = Math.min(1_000 * 2 ** Math.max(0, failures - 1), ceilingMs);
  return ceiling / 2 + random() * (ceiling / 2);
}

/**
 * The wait before trying TDP's server again (reports, acknowledgements, the command stream): 1 s
 * doubling to 5 s, spread the same way. Finished work waits in the local outbox meanwhile, so after a
 * database restart the server hears of it within seconds, not up to half a minute later; a refusal
 * costs the server little.
 */
export function serverRetryMs(failures: number, random: () => number = Math.random): number {
  return backoffMs(failures, random, 5_000);
}

/** A one-shot wake-up for a sleeping loop. */
export class Wakeup {
  private listeners = new Set<() => void>();
  /** Calls `listener` at the next wake; the returned function cancels that. */
  once(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  wake(): void {
    const listeners = this.listeners;
    this.listeners = new Set();
    for (const listener of listeners) listener();
  }
}

/**
 * Whether the runtime is still running, and how it ended: `done` settles once it has stopped, and rejects
 * if a fatal error (a local database error, never a network one) stopped it.
 */
export class Lifecycle {
  private readonly stopping = new AbortController();
  private fatal: Error | null = null;
  private resolveDone!: () => void;
  private rejectDone!: (error: Error) => void;
  readonly done: Promise<void>;

  constructor() {
    this.done = new Promise((resolve, reject) => {
      this.resolveDone = resolve;
      this.rejectDone = reject;
    });
    this.done.catch(() => {});
  }

  get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  get failed(): boolean {
    return this.fatal !== null;
  }

  /** The error `done` will reject with. */
  fail(error: Error): void {
    this.fatal = error;
  }

  /** Fires the stop signal; false if it had already fired. */
  stop(): boolean {
    if (this.stopped) return false;
    this.stopping.abort();
    return true;
  }

  /** Settles `done`: stopping itself does not fail, a fatal error does. */
  settle(): void {
    if (this.fatal) this.rejectDone(this.fatal);
    else this.resolveDone();
  }

  /** Waits `ms`, or less if the runtime stops or `wakeup` fires; leaves no listener behind either way. */
  async sleep(ms: number, wakeup?: Wakeup): Promise<void> {
    if (this.stopped) return;
    const signal = this.stopping.signal;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        forget?.();
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      const forget = wakeup?.once(done);
    });
  }
}
