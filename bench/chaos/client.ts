/**
 * The chaos suite's client: submits jobs at a fixed rate and retries each one, with the same key, until
 * the system accepts it (or the run gives up on it), as a business application would.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { SystemUnderTest } from './system.ts';

export interface Submission {
  key: string;
  /** When the job was first submitted (its latency counts from here). */
  sentAt: number;
  /** When the system accepted it; undefined if it never did. */
  acceptedAt?: number;
  /** The server replica that accepted it (TDP). */
  acceptedBy?: string;
  attempts: number;
}

const retryDelayMs = 250;
/** A submit that has not answered by then is abandoned and tried again (same key). */
const submitTimeoutMs = 10_000;

export class FixedRateClient {
  readonly submissions: Submission[] = [];
  private readonly deliveries: Promise<void>[] = [];

  constructor(
    private readonly system: SystemUnderTest,
    private readonly runName: string,
  ) {}

  /** Submits at `rate()` jobs per second until `untilMs`; each job is retried until `giveUpAt`. */
  async run(rate: () => number, untilMs: number, giveUpAt: number): Promise<void> {
    let due = Date.now();
    for (let i = 0; due < untilMs; i += 1) {
      const wait = due - Date.now();
      if (wait > 0) await sleep(wait);
      const submission: Submission = { key: `${this.runName}-${i}`, sentAt: Date.now(), attempts: 0 };
      this.submissions.push(submission);
      this.deliveries.push(this.deliver(submission, giveUpAt));
      due += 1000 / rate();
    }
  }

  /** Resolves once every submission was accepted or given up on. */
  async settle(): Promise<void> {
    await Promise.all(this.deliveries);
  }

  private async deliver(submission: Submission, giveUpAt: number): Promise<void> {
    for (;;) {
      try {
        const acceptedBy = await Promise.race([
          this.system.submit(submission.key, submission.sentAt, submission.attempts),
          sleep(submitTimeoutMs).then(() => {
            throw new Error('submit timed out');
          }),
        ]);
        submission.acceptedAt = Date.now();
        if (acceptedBy) submission.acceptedBy = acceptedBy;
        return;
      } catch {
        submission.attempts += 1;
        if (Date.now() > giveUpAt) return;
        await sleep(retryDelayMs);
      }
    }
  }
}
