import type { CommittedWork, OutboxSignal, RealtimeHandoffMode } from '../core/facts/ports.ts';

/** A feature's part in what follows a commit: the loops it wakes, the hand-offs it makes. */
export interface AfterCommitListener {
  /** Called after every commit of a fact transaction in this process; must not throw or wait. */
  committed(work: CommittedWork): void;
  /** This listener publishes domain events: facts write domain outbox rows for it. */
  readonly publishesDomainEvents?: boolean;
  /** This listener takes realtime rows at once, in this mode (see `OutboxSignal.realtimeHandoff`). */
  readonly realtimeHandoff?: RealtimeHandoffMode;
}

/**
 * The after-commit hub: the fact session tells it what each commit wrote, and it tells every feature
 * that subscribed (the scheduler's wake-up, the command streams, the timers, the callbacks, the domain
 * events, the realtime hand-off…). A hint, never required: each feature's loop also polls.
 */
export class AfterCommitHub implements OutboxSignal {
  private readonly listeners: AfterCommitListener[] = [];
  /** Read by every fact transaction: kept as the subscribers declare them, not looked up per commit. */
  domainEvents = false;
  realtimeHandoff: RealtimeHandoffMode | undefined = undefined;

  subscribe(listener: AfterCommitListener): void {
    this.listeners.push(listener);
    if (listener.publishesDomainEvents) this.domainEvents = true;
    this.realtimeHandoff ??= listener.realtimeHandoff;
  }

  committed(work: CommittedWork): void {
    for (const listener of this.listeners) listener.committed(work);
  }
}
