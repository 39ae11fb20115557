/**
 * Outbox glossary
 * - claim: a short transaction marks due rows PUBLISHING with a fresh claim id and a lease expiry.
 * - lease: while it lasts, no other dispatcher takes the row; when it lapses (the holder died), anyone may.
 * - mark: "published" or "failed" is recorded only if the row still carries our claim id.
 * - DEAD: attempts exhausted; the row stays for inspection and is not retried automatically.
 */
export interface ClaimedOutboxEvent {
  id: string;
  claimId: string;
  attempts: number;
  tenantId: string;
  applicationId: string;
  eventType: string;
  payload: Record<string, unknown>;
  createdAt: Date;
}

export interface OutboxQueue {
  claim(now: Date, limit: number): Promise<ClaimedOutboxEvent[]>;
  /** Marks rows published; returns the ids that were still ours. */
  markPublished(claimId: string, ids: string[], now: Date): Promise<string[]>;
  /** Records a failed attempt; false when the claim was no longer ours. */
  markFailed(
    claimId: string,
    id: string,
    attempts: number,
    error: string,
    now: Date,
  ): Promise<'FAILED' | 'DEAD' | null>;
  /** The earliest moment a row becomes claimable (due retry or lapsing lease), or null when none. */
  nextDueAt(): Promise<Date | null>;
}

/** A domain event as it leaves TDP. `id` is the event id: the deduplication key everywhere downstream. */
export interface DomainEvent {
  id: string;
  type: string;
  tenantId: string;
  applicationId: string;
  occurredAt: string;
  payload: Record<string, unknown>;
}

export interface EventPublisher {
  publish(event: DomainEvent): Promise<void>;
}
