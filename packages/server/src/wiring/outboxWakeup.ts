import type { CommittedWork, OutboxSignal, RealtimeHandoffMode } from '../core/facts/ports.ts';
import type { RealtimeHandoff } from '../core/realtime/handoff.ts';
import type { WakeableLoop } from '../loops/wakeableLoop.ts';
import type { CapacityWakeup } from './capacityWakeup.ts';
import type { CommandWakeup } from './commandWakeup.ts';

/** The PostgreSQL channel outbox loops in every process LISTEN on. */
export const outboxChannel = 'tdp_outbox';

export type WokenLoops = Partial<
  Record<
    'outbox' | 'realtime' | 'scheduler' | 'timers' | 'callbacks' | 'notifications' | 'schedules' | 'bulkJobs',
    WakeableLoop
  >
>;

/**
 * After a commit, wakes the local loops that have new rows and, for outbox rows, at most every
 * `notifyIntervalMs` (100 ms) sends a NOTIFY so outbox loops in other processes hear about them. The
 * NOTIFY is sent outside the writing transaction (a NOTIFY inside every commit would serialise commits).
 */
export class OutboxWakeup implements OutboxSignal {
  private notifyPending = false;
  loops: WokenLoops = {};
  /** Set when the loops run: projections are published right after their commit. */
  handoff: RealtimeHandoff | null = null;
  realtimeHandoff: RealtimeHandoffMode | undefined = undefined;
  /** Set once the command hub exists: other replicas' streams hear of new commands. */
  commands: CommandWakeup | null = null;
  /** Set once the worker store exists: freed capacity retries the steps waiting for a worker. */
  capacity: CapacityWakeup | null = null;
  /** With Centrifugo: wakes the loops feeding every replica's task streams from committed rows. */
  follower: { committed(): void } | null = null;

  constructor(
    /** Sends the NOTIFY on `outboxChannel`. */
    private readonly notify: () => Promise<unknown>,
    readonly domainEvents: boolean,
    private readonly notifyIntervalMs: number,
  ) {}

  committed(work: CommittedWork): void {
    if (work.scheduling) this.loops.scheduler?.wake();
    if (work.callbacks) this.loops.callbacks?.wake();
    if (work.notifications) this.loops.notifications?.wake();
    if (work.earliestTimer) this.loops.timers?.wakeBy(work.earliestTimer);
    if (work.commandsFor.length > 0) this.commands?.committed(work.commandsFor);
    if (work.capacityFreed) this.capacity?.freed();
    if (this.handoff && work.realtime.length > 0) this.handoff.take(work.realtime);
    if (work.realtime.length > 0) this.follower?.committed();
    if (!work.outbox) return;
    this.loops.outbox?.wake();
    // With the hand-off, the relay's loop only sweeps up what it failed to publish (it polls).
    if (!this.handoff) this.loops.realtime?.wake();
    if (this.notifyPending) return;
    this.notifyPending = true;
    setTimeout(() => {
      this.notifyPending = false;
      this.notify().catch(() => {});
    }, this.notifyIntervalMs).unref();
  }
}
