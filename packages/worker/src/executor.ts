/**
 * Which attempts run: at most `maxConcurrency` at once, and at most a capability's own `maxConcurrency`
 * of that capability; the others wait in arrival order (the server places within the same limits, so
 * waiting is rare: placements between replicas are a soft limit). Each attempt's
 * AbortController is how the rest of the runtime stops it (cancel, lost lease, drain, stop); the reason
 * it is aborted with decides the event it ends with (outcomes.ts).
 */
import { type Running, runAttempt } from './attempt.ts';
import type { EventDraft, LocalAttempt } from './localStore.ts';
import type { RuntimeParts } from './loops.ts';
import { type AbortReason, canceledDraft, handedBackDraft, leaseLostDraft } from './outcomes.ts';
import type { Capability } from './sdk.ts';
import { noSpans } from './tracing.ts';
import type { Transfers } from './transfer.ts';

export interface ExecutorDeps extends RuntimeParts {
  maxConcurrency: number;
  /** Downloads' and uploads' connections (transfer.ts). */
  transfers: Transfers;
  /** The outbox has something new. */
  wakeSender: () => void;
  /** Stops the runtime (after a local database error). */
  stop: () => Promise<void>;
}

export class Executor {
  private readonly capabilities = new Map<string, Capability>();
  private readonly running = new Map<string, Running>();
  private readonly waiting: LocalAttempt[] = [];

  constructor(private readonly deps: ExecutorDeps) {
    for (const capability of deps.options.capabilities)
      this.capabilities.set(`${capability.name}@${capability.version}`, capability);
  }

  /** Attempts running now. */
  get runningCount(): number {
    return this.running.size;
  }

  /** After a restart: attempts that were running are resumed where possible, else handed back. */
  recover(): void {
    const { store } = this.deps.options;
    for (const local of store.runningAttempts()) {
      const capability = this.capabilityOf(local);
      if (
        !this.deps.session.draining &&
        local.workerId === this.deps.session.workerId &&
        capability?.resumable
      )
        this.admit(local, true);
      else this.handBack(local, 'WORKER_RESTARTED');
    }
    if (store.unsentCount() > 0) this.deps.wakeSender();
  }

  admit(local: LocalAttempt, resumed: boolean): void {
    if (this.running.has(local.attemptId)) return;
    if (!this.hasRoomFor(local)) {
      this.waiting.push(local);
      return;
    }
    const { lifecycle, logger } = this.deps;
    const controller = new AbortController();
    const running: Running = { local, controller, lastBeatAt: Date.now(), done: Promise.resolve() };
    this.running.set(local.attemptId, running);
    const attributes = { taskId: local.taskId, stepId: local.stepKey, attempt: local.attempt };
    running.done = (this.deps.options.spans ?? noSpans)
      .run('tdp.worker.attempt', local.traceparent, attributes, async (traceparent) => {
        // The reports continue from this run (kept, so they still do after a restart).
        if (traceparent && traceparent !== local.traceparent)
          this.deps.options.store.saveTraceparent(local.attemptId, traceparent);
        return runAttempt(running, resumed, {
          options: this.deps.options,
          transfers: this.deps.transfers,
          logger,
          capability: this.capabilityOf(local),
          finish: (draft) => this.finish(local.attemptId, draft),
          wakeSender: this.deps.wakeSender,
        });
      })
      .catch((error) => {
        // Only a local database error gets here (capability errors are results).
        if (!lifecycle.failed) {
          lifecycle.fail(error as Error);
          logger.error({ err: error }, 'worker stopped: could not record a result locally');
          void this.deps.stop();
        }
      })
      .finally(() => {
        this.running.delete(local.attemptId);
        if (this.deps.session.draining || lifecycle.stopped) return;
        // The oldest waiting attempt that fits now (one of a full capability waits for its own slot).
        const index = this.waiting.findIndex((w) => this.hasRoomFor(w));
        if (index >= 0) this.admit(this.waiting.splice(index, 1)[0]!, false);
      });
  }

  /** A retryable failure, so the step runs again elsewhere. */
  handBack(local: LocalAttempt, code = 'WORKER_DRAINING'): void {
    this.finish(local.attemptId, handedBackDraft(code));
  }

  /** CANCEL_ATTEMPT: a running attempt is aborted, a waiting one ends here. */
  cancel(attemptId: string): void {
    const running = this.running.get(attemptId);
    if (running) running.controller.abort('CANCELLED' satisfies AbortReason);
    else {
      const index = this.waiting.findIndex((w) => w.attemptId === attemptId);
      if (index >= 0) this.finish(this.waiting.splice(index, 1)[0]!.attemptId, canceledDraft());
    }
  }

  abort(attemptId: string, reason: AbortReason): void {
    this.running.get(attemptId)?.controller.abort(reason);
  }

  abortAll(reason: AbortReason): void {
    for (const running of this.running.values()) running.controller.abort(reason);
  }

  /** Draining: what has not started is handed back at once. */
  handBackWaiting(): void {
    for (const local of this.waiting.splice(0)) this.handBack(local);
  }

  /** The session ended: what has not started lost its lease too. */
  loseWaiting(): void {
    for (const local of this.waiting.splice(0))
      this.deps.options.store.record(local.attemptId, leaseLostDraft(), true);
  }

  /** Settles when every attempt running now has ended. */
  settled(): Promise<unknown> {
    return Promise.all([...this.running.values()].map((r) => r.done));
  }

  runningAttempts(): Running[] {
    return [...this.running.values()];
  }

  private hasRoomFor(local: LocalAttempt): boolean {
    if (this.running.size >= this.deps.maxConcurrency) return false;
    const limit = this.capabilityOf(local)?.maxConcurrency;
    if (limit === undefined) return true;
    let same = 0;
    for (const r of this.running.values()) if (r.local.capability === local.capability) same += 1;
    return same < limit;
  }

  private capabilityOf(local: LocalAttempt): Capability | undefined {
    return this.capabilities.get(`${local.capability}@${local.capabilityVersion}`);
  }

  private finish(attemptId: string, draft: EventDraft): void {
    this.deps.options.store.record(attemptId, draft, true);
    this.deps.wakeSender();
  }
}
