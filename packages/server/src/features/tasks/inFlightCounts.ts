/**
 * An application's tasks in flight as creates check them: counted in PostgreSQL at most once a second per
 * application on each replica, and in between the count read last plus the creates this replica let
 * through since. A create that counts first costs a round trip; this keeps the limit off the common path.
 * Tasks finished since the last read still count, for up to a second: the limit errs on the side of
 * refusing, and a refused create is told to retry later.
 */
import type { TasksInFlight } from '../../core/tasks/ports.ts';

const maxAgeMs = 1_000;
/** Past this many applications the cache starts over, so it cannot grow without bound. */
const maxApplications = 10_000;

export class RecentInFlightCounts implements TasksInFlight {
  private readonly counts = new Map<string, { count: number; readAt: number }>();

  constructor(
    private readonly store: TasksInFlight,
    private readonly monotonicMs: () => number = () => performance.now(),
  ) {}

  async countInFlight(applicationId: string, atMost: number): Promise<number> {
    const now = this.monotonicMs();
    let entry = this.counts.get(applicationId);
    if (!entry || now - entry.readAt >= maxAgeMs) {
      if (this.counts.size >= maxApplications) this.counts.clear();
      entry = { count: await this.store.countInFlight(applicationId, atMost), readAt: now };
      this.counts.set(applicationId, entry);
    }
    const count = entry.count;
    // The create this count lets through is in flight from now on.
    if (count < atMost) entry.count += 1;
    return count;
  }
}
