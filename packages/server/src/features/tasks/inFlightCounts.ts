/**
 * An application's tasks in flight as creates check them: counted in PostgreSQL at most once a second per
 * application on each replica (a TtlCache), and in between the count read last plus the creates this
 * replica let through since. A create that counts first costs a round trip; this keeps the limit off the
 * common path. Tasks finished since the last read still count, for up to a second: the limit errs on the
 * side of refusing, and a refused create is told to retry later. The cache runs on the system's clock,
 * not the server's (a test's clock may stand still): it is about how old a count is, not about tasks.
 */

import { type Clock, systemClock } from '../../core/shared/ports.ts';
import { TtlCache } from '../../core/shared/ttlCache.ts';
import type { TasksInFlight } from '../../core/tasks/ports.ts';

export class RecentInFlightCounts implements TasksInFlight {
  private readonly counts: TtlCache<{ count: number }>;

  constructor(
    private readonly store: TasksInFlight,
    clock: Clock = systemClock,
  ) {
    this.counts = new TtlCache(clock, 1_000);
  }

  async countInFlight(applicationId: string, atMost: number): Promise<number> {
    const entry = (await this.counts.get(applicationId, async () => ({
      count: await this.store.countInFlight(applicationId, atMost),
    })))!;
    const count = entry.count;
    // The create this count lets through is in flight from now on.
    if (count < atMost) entry.count += 1;
    return count;
  }
}
