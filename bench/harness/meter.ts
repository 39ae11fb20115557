/**
 * What the adapter measures and how it reports it to the harness: rolling percentile windows, counters,
 * and the JSONL sample lines on stdout (the harness's adapter contract, CONTRIBUTING_ADAPTERS.md §2–3).
 */
import { readFileSync } from 'node:fs';

/** Latencies of the last `windowMs`, at most `cap` of them (bounded memory; the newest are kept). */
export class TimedWindow {
  private readonly at: Float64Array;
  private readonly values: Float64Array;
  private next = 0;
  private size = 0;

  constructor(
    private readonly windowMs = 30_000,
    private readonly cap = 65_536,
  ) {
    this.at = new Float64Array(cap);
    this.values = new Float64Array(cap);
  }

  add(value: number, now = performance.now()): void {
    this.at[this.next] = now;
    this.values[this.next] = value;
    this.next = (this.next + 1) % this.cap;
    this.size = Math.min(this.size + 1, this.cap);
  }

  /** The p-quantiles (0–1) of the window's values, 0 for an empty window (as the harness's peers do). */
  quantiles(ps: readonly number[], now = performance.now()): number[] {
    const recent: number[] = [];
    for (let i = 0; i < this.size; i += 1)
      if (now - this.at[i]! <= this.windowMs) recent.push(this.values[i]!);
    if (recent.length === 0) return ps.map(() => 0);
    recent.sort((a, b) => a - b);
    return ps.map((p) => recent[Math.round(p * (recent.length - 1))]!);
  }
}

/** One line of telemetry on stdout; stdout carries nothing else. */
export function emit(record: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(record)}\n`);
}

export interface Meters {
  claim: TimedWindow;
  endToEnd: TimedWindow;
  producer: TimedWindow;
  enqueued: number;
  completed: number;
  /** Jobs available and not claimed (instance 0 polls it), null until the first answer. */
  depth: number | null;
  /** The fixed-mode rate in force (the control file's). */
  targetRate: number;
}

export const newMeters = (rate: number): Meters => ({
  claim: new TimedWindow(),
  endToEnd: new TimedWindow(),
  producer: new TimedWindow(),
  enqueued: 0,
  completed: 0,
  depth: null,
  targetRate: rate,
});

const quantiles = [0.5, 0.95, 0.99] as const;

/**
 * Emits every metric once per tick, the first at the next wall-clock multiple of `everyS` (the harness's
 * metrics daemon ticks on the same grid). Rates are the counts since the last tick ÷ `everyS`, so their
 * `window_s` is the real sample interval (the chaos aggregates multiply them back). Returns a stop.
 */
export function startSampler(
  meters: Meters,
  options: { system: string; instanceId: number; everyS: number; observer: boolean },
): () => void {
  const periodMs = options.everyS * 1000;
  let due = Math.ceil(Date.now() / periodMs) * periodMs;
  let lastEnqueued = meters.enqueued;
  let lastCompleted = meters.completed;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    const t = new Date(due).toISOString();
    const line = (metric: string, value: number, windowS: number) =>
      emit({
        t,
        system: options.system,
        kind: 'adapter',
        subject_kind: 'adapter',
        subject: '',
        metric,
        value,
        window_s: windowS,
        instance_id: options.instanceId,
      });
    const now = performance.now();
    for (const [name, window] of [
      ['claim', meters.claim],
      ['end_to_end', meters.endToEnd],
      ['producer', meters.producer],
    ] as const) {
      const [p50, p95, p99] = window.quantiles(quantiles, now);
      line(`${name}_p50_ms`, p50!, 30);
      line(`${name}_p95_ms`, p95!, 30);
      line(`${name}_p99_ms`, p99!, 30);
    }
    line('enqueue_rate', (meters.enqueued - lastEnqueued) / options.everyS, options.everyS);
    line('completion_rate', (meters.completed - lastCompleted) / options.everyS, options.everyS);
    lastEnqueued = meters.enqueued;
    lastCompleted = meters.completed;
    if (options.observer) {
      line('queue_depth', meters.depth ?? 0, 0);
      line('producer_target_rate', meters.targetRate, 0);
    }
    // On the grid whatever a tick cost (a late timer skips no tick and does not drift).
    due += periodMs;
    timer = setTimeout(tick, Math.max(0, due - Date.now()));
  };
  timer = setTimeout(tick, Math.max(0, due - Date.now()));
  return () => clearTimeout(timer);
}

/** The producer's rate: PRODUCER_RATE_CONTROL_FILE when it holds a number (`high-load` rewrites it). */
export function rateReader(file: string | undefined, fallback: number): () => number {
  let last = fallback;
  return () => {
    if (!file) return last;
    try {
      const value = Number(readFileSync(file, 'utf8').trim());
      if (Number.isFinite(value) && value >= 0) last = value;
    } catch {
      // A file being rewritten or gone: keep the last rate.
    }
    return last;
  };
}

/** Runs at most `limit` tasks at once: `run` waits for a free slot, then starts the task. */
export class Limiter {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  async run(task: () => Promise<void>): Promise<void> {
    // A freed slot is handed to the next waiter as it is (the count stays), so none is taken twice.
    if (this.running >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running += 1;
    void task()
      .catch(() => {})
      .finally(() => {
        const next = this.waiting.shift();
        if (next) next();
        else this.running -= 1;
      });
  }

  /** Resolves when nothing runs (the depth-target producer reads the depth after its batch landed). */
  async idle(): Promise<void> {
    while (this.running > 0) await new Promise((resolve) => setTimeout(resolve, 2));
  }
}
