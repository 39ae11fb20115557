/**
 * An application's tasks in flight as creates check them: counted in PostgreSQL at most once a second per
 * application on each replica (a TtlCache), and in between the count read last plus the creates this
 * replica let through since. A create that counts first costs a round trip; this keeps the limit off the
 * common path. Tasks finished since the last read still count, for up to a second: the limit errs on the
 * side of refusing, and a refused create is told to retry later. The cache runs on the system's clock,
 * not the server's (a test's clock may stand still): it is about how old a count is, not about tasks.
 *
 * The application's own quota (docs/scheduling.md#quotas) is read in the same query and kept with the
 * count, so an operator's change to it takes effect on each replica within that second, not at once: a
 * quota is a bound against a runaway client, and a create must not pay a second round trip for it.
 */

import { type Clock, systemClock } from '../../core/shared/ports.ts';
import { TtlCache } from '../../core/shared/ttlCache.ts';
import type { InFlightCount, TasksInFlight } from '../../core/tasks/ports.ts';

export class RecentInFlightCounts implements TasksInFlight {
  private readonly counts: TtlCache<InFlightCount>;

  constructor(
    private readonly store: TasksInFlight,
    clock: Clock = systemClock,
  ) {
    this.counts = new TtlCache(clock, 1_000);
  }

  async inFlight(applicationId: string, platformLimit: number): Promise<InFlightCount> {
    const entry = (await this.counts.get(applicationId, () =>
      this.store.inFlight(applicationId, platformLimit),
    ))!;
    const seen = { ...entry };
    // The create this count lets through is in flight from now on.
    if (entry.limit > 0 && entry.count < entry.limit) entry.count += 1;
    return seen;
  }
}
