import type { Logger } from 'pino';

export interface LoopRound {
  /** True when the round filled its batch: more work is likely waiting, so run again at once. */
  full: boolean;
}

export interface WakeableLoopOptions {
  name: string;
  round: () => Promise<LoopRound>;
  /** When the next row becomes due, to sleep exactly until then. */
  nextDueAt: () => Promise<Date | null>;
  logger: Logger;
  /** The clock due times are measured against. */
  now: () => Date;
  /** Upper bound on a sleep, as a safety net for missed wake-ups. */
  maxIdleMs: number;
  /**
   * After a round that did not fill its batch, wait at least this long before the next one, even when
   * woken. Under a stream of commits this gathers many rows per round instead of one round per commit.
   */
  batchWindowMs?: number;
  /** The back-off after failed rounds (default: `defaultLoopRetry`, 1 s doubling to 30 s). */
  retry?: LoopRetry;
  /** A monotonic clock in ms for the loop's own health (`now` may be a test's frozen clock). */
  monotonicMs?: () => number;
}

/** What `/readyz` reads of a loop: how long its round in progress has run, when it last finished one. */
export interface LoopHealth {
  name: string;
  /** How long the round in progress (with its due-time read) has run; null while it sleeps. */
  busyForMs: number | null;
  /** How long ago the last round finished, well or not; null before the first. */
  lastRoundAgoMs: number | null;
}

/** A failed round is retried after `firstMs`, doubling up to `maxMs`. */
export interface LoopRetry {
  firstMs: number;
  maxMs: number;
}

export const defaultLoopRetry: LoopRetry = { firstMs: 1_000, maxMs: 30_000 };

/** How one background loop paces itself (each feature's settings give its loops' measured values). */
export interface LoopPacing {
  /** Rows one round takes at most; a full round runs the next one at once. */
  batchSize: number;
  /** The longest sleep between rounds, a safety net for missed wake-ups. */
  maxIdleMs: number;
  /** After a round that was not full, wait at least this long, even when woken (gathers rows). */
  batchWindowMs: number;
}

/**
 * Runs `round` until stopped. It sleeps until the next due time, or until `wake()` (an in-process commit
 * or a NOTIFY) says there is new work. Errors back off (1 s doubling to 30 s); the loop never dies of them.
 */
export class WakeableLoop {
  private running = false;
  private wakeRequested = false;
  private sleeper: { timer: NodeJS.Timeout; resolve: () => void; wakeable: boolean; until: number } | null =
    null;
  /** The earliest due time announced by `wakeBy` while no sleep could take it. */
  private announcedDue = Number.POSITIVE_INFINITY;
  private done: Promise<void> = Promise.resolve();
  private busySince: number | null = null;
  private lastRoundAt: number | null = null;
  private readonly monotonicMs: () => number;

  constructor(private readonly options: WakeableLoopOptions) {
    this.monotonicMs = options.monotonicMs ?? (() => performance.now());
  }

  get name(): string {
    return this.options.name;
  }

  health(): LoopHealth {
    const now = this.monotonicMs();
    return {
      name: this.options.name,
      busyForMs: this.busySince === null ? null : Math.round(now - this.busySince),
      lastRoundAgoMs: this.lastRoundAt === null ? null : Math.round(now - this.lastRoundAt),
    };
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.done = this.run();
  }

  wake(): void {
    this.wakeRequested = true;
    if (this.sleeper?.wakeable) this.interrupt();
  }

  /**
   * New work becomes due at `due`: sleep no later than that. Cheaper than `wake()` for work due later
   * (a timer written by every dispatch): no round runs before it is due.
   */
  wakeBy(due: Date): void {
    const at = due.getTime();
    const now = this.options.now().getTime();
    if (at <= now) {
      this.wake();
      return;
    }
    const sleeper = this.sleeper;
    if (sleeper?.wakeable) {
      if (at < sleeper.until) {
        clearTimeout(sleeper.timer);
        sleeper.timer = setTimeout(sleeper.resolve, at - now);
        sleeper.until = at;
      }
      return;
    }
    // Mid-round (or in the batch window): the next sleep is planned with it.
    this.announcedDue = Math.min(this.announcedDue, at);
  }

  /** Stops after the round in progress finishes. */
  async stop(): Promise<void> {
    this.running = false;
    this.interrupt();
    await this.done;
  }

  private interrupt(): void {
    if (!this.sleeper) return;
    clearTimeout(this.sleeper.timer);
    this.sleeper.resolve();
  }

  private async sleep(ms: number, wakeable: boolean): Promise<void> {
    this.busySince = null;
    const until = this.options.now().getTime() + ms;
    await new Promise<void>((resolve) => {
      this.sleeper = { timer: setTimeout(resolve, ms), resolve, wakeable, until };
    });
    this.sleeper = null;
  }

  /** Notes the end of a round that succeeded (a failed one is noted where it is caught). */
  private async finished(round: Promise<LoopRound>): Promise<LoopRound> {
    const result = await round;
    this.lastRoundAt = this.monotonicMs();
    return result;
  }

  private async run(): Promise<void> {
    const window = this.options.batchWindowMs ?? 0;
    const maxIdle = this.options.maxIdleMs;
    const retry = this.options.retry ?? defaultLoopRetry;
    let failures = 0;
    while (this.running) {
      this.wakeRequested = false;
      this.busySince = this.monotonicMs();
      try {
        const { full } = await this.finished(this.options.round());
        failures = 0;
        if (full) continue;
        if (window > 0) await this.sleep(window, false);
        if (this.wakeRequested || !this.running) continue;
        this.busySince ??= this.monotonicMs();
        const due = await this.options.nextDueAt();
        const dueAt = Math.min(due?.getTime() ?? Number.POSITIVE_INFINITY, this.announcedDue);
        this.announcedDue = Number.POSITIVE_INFINITY;
        const delayMs = Math.min(Math.max(dueAt - this.options.now().getTime(), 0), maxIdle);
        if (this.wakeRequested || !this.running) continue;
        await this.sleep(delayMs, true);
      } catch (error) {
        this.lastRoundAt = this.monotonicMs();
        failures += 1;
        const delayMs = Math.min(retry.firstMs * 2 ** (failures - 1), retry.maxMs);
        this.options.logger.warn(
          { err: error, loop: this.options.name, retryInMs: delayMs },
          'loop round failed',
        );
        if (this.running) await this.sleep(delayMs, true);
      }
    }
  }
}
