/**
 * Commit→visible as people see it (docs/observability.md): the task store tells this reporter how long
 * after its commit each live message was shown; a sample of them is sent in small batches to
 * `POST /v1/telemetry/visibility` with the person's user token. The figure includes the browser's clock
 * offset from the server's, so it is read as a distribution, not per user.
 */

export interface VisibilityReporterOptions {
  /** TDP's base URL, e.g. https://tdp.example.com. */
  baseUrl: string;
  /** The person's user token (POST /v1/user-tokens), read at each send. */
  token: () => string | Promise<string>;
  /** Fraction of the messages measured (default 0.1). */
  sampleRate?: number;
  /** How often a batch is sent (default 10 s). */
  flushIntervalMs?: number;
  /** Samples per batch at most (the server takes 50); more are dropped until the next send. */
  maxSamples?: number;
  fetch?: typeof fetch;
  random?: () => number;
}

export class VisibilityReporter {
  private samples: number[] = [];
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(private readonly options: VisibilityReporterOptions) {
    this.timer = setInterval(() => void this.flush(), options.flushIntervalMs ?? 10_000);
    (this.timer as { unref?: () => void }).unref?.();
  }

  /** One message shown `seconds` after its commit (the task store calls this; it samples here). */
  readonly observe = (seconds: number): void => {
    if ((this.options.random ?? Math.random)() >= (this.options.sampleRate ?? 0.1)) return;
    if (!Number.isFinite(seconds) || this.samples.length >= (this.options.maxSamples ?? 50)) return;
    this.samples.push(Math.min(3_600, Math.max(0, seconds)));
  };

  /** Sends what was sampled so far; a failed send is dropped (a measurement is not worth a retry). */
  async flush(): Promise<void> {
    if (this.samples.length === 0) return;
    const commitToVisibleSeconds = this.samples;
    this.samples = [];
    try {
      await (this.options.fetch ?? fetch)(`${this.options.baseUrl}/v1/telemetry/visibility`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${await this.options.token()}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ commitToVisibleSeconds }),
      });
    } catch {
      // Offline or refused: the next batch tries again with new samples.
    }
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
