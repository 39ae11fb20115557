/**
 * When a commit ends attempts, the workers that ran them have room again: scheduling requests that were
 * put back because no worker could take them (at its concurrency limit, short of resources) become due
 * now, and the scheduler is woken (also when none was: due steps a full round left unclaimed), instead of waiting out their retry interval. The database update
 * makes them due for every replica's scheduler. Rounds are coalesced: one update in flight at a time, at
 * most one more queued behind it, and none closer together than `minIntervalMs`.
 */
export class CapacityWakeup {
  private running = false;
  private again = false;
  private lastAt = Number.NEGATIVE_INFINITY;
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> = Promise.resolve();
  private freedCount = 0;

  constructor(
    /** Makes the put-back requests due now (`WorkerStore.retryDeferred`); how many there were. */
    private readonly retryDeferred: () => Promise<number>,
    private readonly wakeScheduler: () => void,
    private readonly minIntervalMs: number,
    private readonly onError: (error: unknown) => void,
    private readonly monotonicMs: () => number = () => performance.now(),
  ) {}

  /**
   * How many times capacity was freed: a scheduler round that defers requests compares it before and
   * after. A `freed` during the round ran its update while the round still held the requests (they were
   * not yet deferred, so it did not touch them); the round then calls `freed` again once its deferral
   * has committed, or they would wait out the retry interval beside an idle worker.
   */
  get generation(): number {
    return this.freedCount;
  }

  freed(): void {
    this.freedCount += 1;
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    const wait = Math.max(0, this.lastAt + this.minIntervalMs - this.monotonicMs());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.inFlight = this.round();
    }, wait).unref();
  }

  /** No round starts after this; resolves once the one in flight is done (before the pool closes). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
      this.running = false;
    }
    await this.inFlight;
  }

  private async round(): Promise<void> {
    this.lastAt = this.monotonicMs();
    try {
      await this.retryDeferred();
      // Also when none was put back: steps may be due but unclaimed (a round claims no more than the
      // free slots it saw).
      this.wakeScheduler();
    } catch (error) {
      this.onError(error);
    } finally {
      this.running = false;
      if (this.again && !this.stopped) {
        this.again = false;
        this.freed();
      }
    }
  }
}
