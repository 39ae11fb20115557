import type { EventDraft } from './localStore.ts';

/**
 * One progress report per interval per attempt, except that a new phase goes out at once; the newest
 * value held back is written by `flush` (before the final event) or when the interval has passed.
 */
export class ProgressThrottle {
  private lastAt = 0;
  private lastPhase: string | undefined;
  private lastPercent = -1;
  private held: EventDraft | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly intervalMs: number,
    private readonly write: (draft: EventDraft) => void,
    private readonly now: () => number = Date.now,
  ) {}

  report(percent: number, update: { phase?: string; message?: string } = {}): void {
    // Progress only rises; a lower value is ignored rather than sent to be refused.
    const value = Math.max(Math.min(100, Math.max(0, percent)), this.lastPercent);
    const draft: EventDraft = {
      eventType: 'STEP_PROGRESS',
      progress: { percent: value },
      ...(update.phase ? { phaseCode: update.phase.slice(0, 64) } : {}),
      ...(update.message ? { message: update.message.slice(0, 500) } : {}),
    };
    const phaseChanged = update.phase !== undefined && update.phase !== this.lastPhase;
    if (phaseChanged || this.now() - this.lastAt >= this.intervalMs) this.send(draft, update.phase);
    else {
      this.held = draft;
      this.timer ??= setTimeout(() => this.flush(), this.intervalMs - (this.now() - this.lastAt));
      this.timer.unref?.();
    }
  }

  /** Drops what is held back (the runtime stopped: nothing more is written). */
  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.held = null;
  }

  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.held) this.send(this.held, (this.held.phaseCode as string | undefined) ?? this.lastPhase);
  }

  private send(draft: EventDraft, phase: string | undefined): void {
    this.held = null;
    this.lastAt = this.now();
    if (phase !== undefined) this.lastPhase = phase;
    this.lastPercent = (draft.progress as { percent: number }).percent;
    this.write(draft);
  }
}
