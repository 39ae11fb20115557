/**
 * Two server replicas on one database, with their loops running and their test clocks set to one time
 * and keeping up with real time in 20 ms ticks (as NTP keeps real ones together): a deferred request comes
 * due, a bucket refills. For tests of what must hold whichever replica places (limits, rates, fair order).
 */
import { connectDatabase } from '../packages/server/src/main.ts';
import { type Harness, startHarness } from './harness.ts';

export interface Replicas {
  first: Harness;
  second: Harness;
  /** A connection of the test's own to the shared database (for SQL over the whole run). */
  sql: ReturnType<typeof connectDatabase>;
  close(): Promise<void>;
}

export async function startReplicas(settings: Record<string, unknown>): Promise<Replicas> {
  const first = await startHarness({ runLoops: true, settings });
  const second = await startHarness({ runLoops: true, settings, sharedDatabaseUrl: first.databaseUrl });
  const sql = connectDatabase({ url: first.databaseUrl, maxConnections: 2 });
  second.clock.set(first.clock.now());
  const ticking = setInterval(() => {
    first.clock.advance(20);
    second.clock.advance(20);
  }, 20);
  return {
    first,
    second,
    sql,
    close: async () => {
      clearInterval(ticking);
      await sql.end();
      await second.close();
      await first.close();
    },
  };
}
