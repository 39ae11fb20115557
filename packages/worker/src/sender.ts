/**
 * The single sender of a process: delivers the local outbox in batches of up to 200 events, which also
 * acknowledge the commands received so far. Network errors, 429 and 5xx back off while attempts keep
 * running (the events wait with their event ids, so a resend is applied once). An event is marked sent
 * only once the server answered it, and an acknowledgement only once the server wrote it.
 *
 * A 401/403 sends nothing more until a key works (runtime.ts, keyRefusal.ts): the batch stays in the
 * outbox. Events of an earlier session the current key does not own (after a new key) are set aside,
 * still unsent, so that they hold up nothing; they are tried again when the key changes or works again.
 */
import { RejectedError, UnavailableError } from './client.ts';
import type { LocalStore, OutboxEvent } from './localStore.ts';
import { type RuntimeParts, serverRetryMs, Wakeup } from './loops.ts';
import { noSpans } from './tracing.ts';

export interface SenderDeps extends RuntimeParts {
  /** The server no longer leases this attempt to us: it is stopped (its events are only a record). */
  leaseLost: (attemptId: string) => void;
  /** A 401/403 on the current session's events: resolves once the session (or a new one) is accepted. */
  sessionLost: (reason: string) => Promise<void>;
}

/** The local SQLite forgets acknowledged rows after this long (`localRetentionMs`), looked at this often. */
export const defaultLocalRetentionMs = 24 * 3_600_000;
const pruneEveryMs = 10 * 60_000;

/**
 * Refusals that say the attempt is over (its step already ended — the task failed or was cancelled — or a
 * newer attempt replaced it): its late reports are only a record, dropped quietly.
 */
const attemptOver: ReadonlySet<string> = new Set(['INVALID_TRANSITION', 'STALE_EXECUTION']);

export class Sender {
  private readonly wakeup = new Wakeup();
  private lastPruneAt = 0;
  /** Sessions whose events the server refuses with the current key: kept, not sent for now. */
  private readonly parked = new Set<string>();

  constructor(private readonly deps: SenderDeps) {}

  /** Something new is in the outbox (or the runtime stops): send now rather than at the next round. */
  wake(): void {
    this.wakeup.wake();
  }

  /** The key changed or works again: events set aside are tried again. */
  retryParked(): void {
    this.parked.clear();
    this.wake();
  }

  async loop(): Promise<void> {
    const { store } = this.deps.options;
    const { lifecycle, logger } = this.deps;
    let failures = 0;
    while (!lifecycle.stopped) {
      const batch = store.unsent(200, this.parked);
      if (batch.length === 0) {
        this.pruneNowAndThen();
        await lifecycle.sleep(1_000, this.wakeup);
        continue;
      }
      try {
        await this.deliver(batch);
        failures = 0;
      } catch (error) {
        if (error instanceof RejectedError) {
          // Nothing of the batch is marked: it goes again once the key (or a new session) is accepted.
          await this.deps.sessionLost(error.message);
          continue;
        }
        if (!(error instanceof UnavailableError)) throw error;
        failures += 1;
        const wait = serverRetryMs(failures);
        logger.warn(
          { err: error.message, failures, retryInMs: Math.round(wait) },
          'events not delivered; retrying',
        );
        await lifecycle.sleep(wait);
      }
    }
  }

  /** With nothing to send, now and then: forget what the server acknowledged long enough ago. */
  private pruneNowAndThen(): void {
    if (Date.now() - this.lastPruneAt < pruneEveryMs) return;
    this.lastPruneAt = Date.now();
    const pruned = this.deps.options.store.prune(
      this.deps.options.localRetentionMs ?? defaultLocalRetentionMs,
    );
    if (pruned.outbox + pruned.attempt + pruned.inbox > 0)
      this.deps.logger.info({ pruned }, 'local store pruned');
  }

  /** Waits (up to `ms`) until the outbox is empty. */
  async flush(ms: number): Promise<void> {
    const { store } = this.deps.options;
    const deadline = Date.now() + ms;
    this.wake();
    while (store.unsentCount() > 0 && Date.now() < deadline && !this.deps.lifecycle.stopped)
      await new Promise((resolve) => setTimeout(resolve, 25));
  }

  /** Sends one batch (grouped by the session each attempt belongs to); marks what the server answered. */
  private async deliver(batch: OutboxEvent[]): Promise<void> {
    const store: LocalStore = this.deps.options.store;
    const byWorker = new Map<string, OutboxEvent[]>();
    for (const event of batch) {
      const list = byWorker.get(event.workerId) ?? [];
      list.push(event);
      byWorker.set(event.workerId, list);
    }
    for (const [workerId, events] of byWorker) {
      // Commands received so far are acknowledged along with the current session's events.
      const current = workerId === this.deps.session.workerId;
      const acks = current ? store.unacked().slice(0, 1000) : [];
      const reporting = this.deps.options.reporting ?? this.deps.options.client;
      let report: Awaited<ReturnType<typeof reporting.report>>;
      try {
        report = await (this.deps.options.spans ?? noSpans).run(
          'tdp.worker.report',
          events.find((e) => e.traceparent)?.traceparent,
          { events: events.length },
          (traceparent) =>
            reporting.report(
              workerId,
              events.map((e) => e.body),
              acks,
              traceparent,
            ),
        );
      } catch (error) {
        if (current || !(error instanceof RejectedError)) throw error;
        // An earlier session, not this key's: its events wait (unsent) for a key that owns it.
        this.parked.add(workerId);
        this.deps.logger.warn(
          { workerId, events: events.length },
          'events of an earlier session refused with this key; kept until its key works',
        );
        continue;
      }
      const { outcomes } = report;
      if (acks.length > 0 && report.acked) store.markAcked(acks);
      for (const outcome of outcomes) {
        if (outcome.ok) continue;
        const event = events.find((e) => e.eventId === outcome.eventId);
        const fields = { eventId: outcome.eventId, code: outcome.code, detail: outcome.detail };
        if (attemptOver.has(outcome.code))
          this.deps.logger.debug?.(fields, 'event refused: its attempt is over');
        else this.deps.logger.warn(fields, 'event refused');
        if (event && (outcome.code === 'STALE_EXECUTION' || outcome.code === 'STEP_NOT_REGISTERED'))
          this.deps.leaseLost(event.attemptId);
      }
      // Every item got an answer: delivered (accepted, a duplicate, or refused for good).
      store.markSent(events.map((e) => e.eventId));
    }
  }
}
