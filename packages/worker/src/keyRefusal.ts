/**
 * A refused worker key (TDP answered 401/403 to a registration): the worker keeps everything and waits for
 * a key that works, rather than dropping results or stopping. While the key is refused, the sender sends
 * nothing and marks nothing sent, running attempts go on (their results wait in the outbox), the health
 * endpoint answers 503 (`KEY_REFUSED`), and one line is logged for the whole refusal, not one per retry.
 */
import type { RejectedError } from './client.ts';
import { Wakeup } from './loops.ts';
import type { Logger } from './options.ts';

/** While the key is refused, it is tried again this often (or at once when a new key is configured). */
export const defaultKeyRetryMs = 5_000;

export class KeyRefusal {
  private refusedAt: number | null = null;
  /** Fires when a new key is configured: try it now rather than at the next round. */
  readonly keyChanged = new Wakeup();

  constructor(private readonly logger: Logger) {}

  get refused(): boolean {
    return this.refusedAt !== null;
  }

  refuse(error: RejectedError): void {
    if (this.refusedAt !== null) return;
    this.refusedAt = Date.now();
    // The answer's text, not the error: no stack, and nothing of the key (it is never in an answer).
    this.logger.error(
      { status: error.status, answer: error.message },
      'worker key refused by TDP: sending nothing and keeping every result until a key works',
    );
  }

  accepted(): void {
    if (this.refusedAt === null) return;
    this.logger.info(
      { refusedForMs: Date.now() - this.refusedAt },
      'worker key accepted again: sending the results kept meanwhile',
    );
    this.refusedAt = null;
  }
}
