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
  maxIdleMs?: number;
  /**
   * After a round that did not fill its batch, wait at least this long before the next one, even when
   * woken. Under a stream of commits this gathers many rows per round instead of one round per commit.
   */
  batchWindowMs?: number;
}

/**
 * Runs `round` until stopped. It sleeps until the next due time, or until `wake()` (an in-process commit
 * or a NOTIFY) says there is new work. Errors back off from 1 s to 30 s; the loop never dies of them.
 */
export class WakeableLoop {
  private running = false;
  private wakeRequested = false;
  private sleeper: { timer: NodeJS.Timeout; resolve: () => void; wakeable: boolean } | null = null;
  private done: Promise<void> = Promise.resolve();

  constructor(private readonly options: WakeableLoopOptions) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.done = this.run();
  }

  wake(): void {
    this.wakeRequested = true;
    if (this.sleeper?.wakeable) this.interrupt();
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
    await new Promise<void>((resolve) => {
      this.sleeper = { timer: setTimeout(resolve, ms), resolve, wakeable };
    });
    this.sleeper = null;
  }

  private async run(): Promise<void> {
    const window = this.options.batchWindowMs ?? 0;
    const maxIdle = this.options.maxIdleMs ?? 30_000;
    let failures = 0;
    while (this.running) {
      this.wakeRequested = false;
      try {
        const { full } = await this.options.round();
        failures = 0;
        if (full) continue;
        if (window > 0) await this.sleep(window, false);
        if (this.wakeRequested || !this.running) continue;
        const due = await this.options.nextDueAt();
        const delayMs = due
          ? Math.min(Math.max(due.getTime() - this.options.now().getTime(), 0), maxIdle)
          : maxIdle;
        if (this.wakeRequested || !this.running) continue;
        await this.sleep(delayMs, true);
      } catch (error) {
        failures += 1;
        const delayMs = Math.min(1_000 * 2 ** (failures - 1), 30_000);
        this.options.logger.warn(
          { err: error, loop: this.options.name, retryInMs: delayMs },
          'loop round failed',
        );
        if (this.running) await this.sleep(delayMs, true);
      }
    }
  }
}
