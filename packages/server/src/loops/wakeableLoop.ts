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
}

/**
 * Runs `round` until stopped. It sleeps until the next due time, or until `wake()` (an in-process commit
 * or a NOTIFY) says there is new work. Errors back off from 1 s to 30 s; the loop never dies of them.
 */
export class WakeableLoop {
  private running = false;
  private wakeRequested = false;
  private sleeper: { timer: NodeJS.Timeout; resolve: () => void } | null = null;
  private done: Promise<void> = Promise.resolve();

  constructor(private readonly options: WakeableLoopOptions) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.done = this.run();
  }

  wake(): void {
    this.wakeRequested = true;
    if (this.sleeper) {
      clearTimeout(this.sleeper.timer);
      this.sleeper.resolve();
    }
  }

  /** Stops after the round in progress finishes. */
  async stop(): Promise<void> {
    this.running = false;
    this.wake();
    await this.done;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (this.running) {
      this.wakeRequested = false;
      let delayMs: number;
      try {
        const { full } = await this.options.round();
        failures = 0;
        if (full || this.wakeRequested) continue;
        const due = await this.options.nextDueAt();
        const maxIdle = this.options.maxIdleMs ?? 30_000;
        delayMs = due
          ? Math.min(Math.max(due.getTime() - this.options.now().getTime(), 0), maxIdle)
          : maxIdle;
      } catch (error) {
        failures += 1;
        delayMs = Math.min(1_000 * 2 ** (failures - 1), 30_000);
        this.options.logger.warn(
          { err: error, loop: this.options.name, retryInMs: delayMs },
          'loop round failed',
        );
      }
      if (this.wakeRequested || !this.running) continue;
      await new Promise<void>((resolve) => {
        this.sleeper = { timer: setTimeout(resolve, delayMs), resolve };
      });
      this.sleeper = null;
    }
  }
}
