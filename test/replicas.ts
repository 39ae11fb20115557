/**
 * Two server replicas on one database, with their loops running and their test clocks set to one time
 * and keeping up with real time in 20 ms ticks (as NTP keeps real ones together): a deferred request comes
 * due, a bucket refills. For tests of what must hold whichever replica places (limits, rates, fair order).
 */
import { connectDatabase } from '../packages/server/src/main.ts';
import { type Harness, startHarness } from './harness.ts';
import { attemptEvent, startTestWorker } from './testWorker.ts';

export interface Replicas {
  first: Harness;
  second: Harness;
  /** A connection of the test's own to the shared database (for SQL over the whole run). */
  sql: ReturnType<typeof connectDatabase>;
  close(): Promise<void>;
}

/** Commands polled every 20 ms, an unplaceable step retried after 200 ms, leases checked every 200 ms. */
const quickSettings = { commandPollIntervalMs: 20, retryUnplaceableMs: 200, leaseCheckIntervalMs: 200 };

export async function startReplicas(settings: Record<string, unknown> = quickSettings): Promise<Replicas> {
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

/**
 * A worker of `capability` (16 slots) that holds each attempt `holdMs` (after `gate` opens, if given)
 * and keeps its own count of each customer's attempts at once (`most`: the highest), the customer
 * read from the attempt's `customerId` input.
 */
export async function startCustomerWorker(
  replica: Harness,
  options: { label: string; capability: string; holdMs: number; gate?: Promise<void> },
) {
  const workerKey = (
    await replica.request('POST', '/admin/v1/worker-credentials', {
      token: replica.adminToken,
      body: { label: options.label },
    })
  ).body.key;
  const running = new Map<string, number>();
  const most = new Map<string, number>();
  const worker = await startTestWorker({
    baseUrl: replica.url,
    workerKey,
    nodeId: `${options.label}-node`,
    capabilities: [{ name: options.capability, version: '1' }],
    maxConcurrency: 16,
    handler: async (command, report) => {
      const customer = String((command.input as { customerId?: string }).customerId ?? '');
      running.set(customer, (running.get(customer) ?? 0) + 1);
      most.set(customer, Math.max(most.get(customer) ?? 0, running.get(customer)!));
      await report([attemptEvent(command, 'STEP_STARTED', 1)]);
      await options.gate;
      await new Promise((resolve) => setTimeout(resolve, options.holdMs));
      running.set(customer, running.get(customer)! - 1);
      await report([attemptEvent(command, 'STEP_COMPLETED', 2, { output: {}, durationMs: options.holdMs })]);
    },
  });
  return { worker, most };
}

/** How many of the tasks `ids` have succeeded. */
export async function succeededCount(sql: Replicas['sql'], ids: string[]): Promise<number> {
  const [row] = await sql<{ done: number }[]>`
    SELECT count(*)::int AS done FROM task WHERE id = ANY(${ids}::uuid[]) AND lifecycle_status = 'SUCCEEDED'`;
  return row!.done;
}

/** Reads `count` every 5 ms until stopped; `stop` resolves with the highest value read. */
export function sampleHighest(count: () => Promise<number>) {
  let highest = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      highest = Math.max(highest, await count());
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  return {
    stop: async () => {
      sampling = false;
      await sampler;
      return highest;
    },
  };
}
