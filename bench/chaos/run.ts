/**
 * One scenario on one system: a steady phase, the fault, a recovery phase at the steady rate, then a
 * drain (no new jobs) until everything accepted has finished or the drain deadline passed. The suite
 * runs VACUUM on the system's database every few seconds, standing in for autovacuum (whose one-minute
 * nap is longer than a scenario), so the dead tuples it reports are the ones vacuum could not remove.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { FixedRateClient } from './client.ts';
import { type Cluster, Monitor } from './cluster.ts';
import type { Scenario } from './faults.ts';
import { measure, type Result } from './measure.ts';
import { PairCluster } from './pairCluster.ts';
import type { SystemOptions, SystemUnderTest } from './system.ts';

export interface Timing {
  steadyMs: number;
  faultMs: number;
  recoveryMs: number;
  drainMs: number;
  /** Steady submission rate, jobs/s. */
  rate: number;
}

export type StartSystem = (
  cluster: Cluster,
  runName: string,
  options: SystemOptions,
) => Promise<SystemUnderTest>;

const vacuumEveryMs = 5_000;

/** Samples the sum of n_dead_tup over the database's tables every second, vacuuming every few seconds. */
function sampleDeadTuples(monitor: Monitor) {
  let max = 0;
  let last = 0;
  let stopped = false;
  const loop = (async () => {
    let lastVacuum = Date.now();
    while (!stopped) {
      if (Date.now() - lastVacuum >= vacuumEveryMs) {
        lastVacuum = Date.now();
        await monitor.query('VACUUM');
      }
      const rows = await monitor.query<{ n: string }>(
        'SELECT coalesce(sum(n_dead_tup), 0)::bigint AS n FROM pg_stat_user_tables',
      );
      if (rows) {
        last = Number(rows[0]!.n);
        max = Math.max(max, last);
      }
      await sleep(1_000);
    }
  })();
  return async () => {
    stopped = true;
    await loop;
    return { max, end: last };
  };
}

/**
 * A few jobs run through before the clock starts (the first of a fresh system wait for connections,
 * plans and worker sessions); they are not counted, but they are checked with the rest.
 */
async function warmUp(system: SystemUnderTest, runName: string, count: number): Promise<void> {
  const keys = Array.from({ length: count }, (_, i) => `warm-${runName}-${i}`);
  await Promise.all(keys.map((key, i) => system.submit(key, Date.now(), i)));
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const finished = await system.finished();
    if (finished && keys.every((key) => finished.has(key))) return;
    await sleep(100);
  }
  console.log(`  ${system.name}: the warm-up jobs did not finish within 30 s; measuring anyway`);
}

async function until(at: number): Promise<void> {
  const wait = at - Date.now();
  if (wait > 0) await sleep(wait);
}

export async function runScenario(
  suiteCluster: Cluster,
  scenario: Scenario,
  systemName: string,
  start: StartSystem,
  timing: Timing,
  options: SystemOptions,
): Promise<Result> {
  const pair = scenario.pair ? await PairCluster.start(scenario.pair) : null;
  const load = scenario.load;
  try {
    const result = await runOn(
      pair ?? suiteCluster,
      scenario,
      systemName,
      start,
      load ? { ...timing, rate: load.rate, faultMs: load.faultMs } : timing,
      load ? { ...options, concurrency: load.concurrency } : options,
    );
    return scenario.lossByDesign ? { ...result, lossByDesign: scenario.lossByDesign } : result;
  } finally {
    await pair?.close();
  }
}

async function runOn(
  cluster: Cluster,
  scenario: Scenario,
  systemName: string,
  start: StartSystem,
  timing: Timing,
  options: SystemOptions,
): Promise<Result> {
  const runName = `${scenario.name}-${systemName.replace(/\W/g, '')}-${Date.now().toString(36)}`;
  const setupStarted = Date.now();
  const system = await start(cluster, runName, options);
  const monitor = new Monitor(cluster.urlFor(system.database));
  await monitor.connect();
  await warmUp(system, runName, options.concurrency * system.workers.length);
  const setupSeconds = (Date.now() - setupStarted) / 1000;
  const client = new FixedRateClient(system, runName);
  let rate = timing.rate;
  const capacity = (system.workers.length * options.concurrency * 1000) / options.sleepMs;
  const context = {
    system,
    cluster,
    monitor,
    rate: timing.rate,
    capacity,
    setRate: (perSecond: number) => {
      rate = perSecond;
    },
  };
  const startedAt = Date.now();
  const faultStartedAt = startedAt + timing.steadyMs;
  const plannedFaultEnd = faultStartedAt + timing.faultMs;
  const endedAt = plannedFaultEnd + timing.recoveryMs;
  const drainDeadline = endedAt + timing.drainMs;
  const stopSampling = sampleDeadTuples(monitor);
  const submitting = client.run(() => rate, endedAt, drainDeadline);

  await until(faultStartedAt);
  let faultEndedAt = plannedFaultEnd;
  try {
    await scenario.start(context);
    await until(plannedFaultEnd);
    faultEndedAt = Date.now();
    await scenario.end(context);
  } catch (error) {
    console.error(`  ${scenario.name} on ${systemName}: the fault itself failed:`, error);
    await cluster.startPostgres().catch(() => {}); // never leave the next run without a database
  }
  await submitting;
  await client.settle();

  // Drain: wait until every accepted job has finished, or the deadline.
  const accepted = () => client.submissions.filter((s) => s.acceptedAt !== undefined).map((s) => s.key);
  let finished = new Set<string>();
  while (Date.now() < drainDeadline) {
    finished = (await system.finished()) ?? finished;
    if (accepted().every((key) => finished.has(key))) break;
    await sleep(500);
  }
  finished = (await system.finished()) ?? finished;
  const integrity = await system.integrity();
  const unresponsive = await system.unresponsive();
  const deadTuples = await stopSampling();
  await monitor.close();
  const teardownStarted = Date.now();
  await system.close();
  await cluster.dropDatabase(system.database).catch(() => {});
  console.log(
    `  ${systemName}: set-up ${setupSeconds.toFixed(1)} s, run ${((teardownStarted - startedAt) / 1000).toFixed(1)} s, ` +
      `stop ${((Date.now() - teardownStarted) / 1000).toFixed(1)} s`,
  );
  return measure(
    { scenario: scenario.name, system: systemName },
    { startedAt, faultStartedAt, faultEndedAt, endedAt },
    client.submissions,
    system.completions,
    finished,
    integrity,
    {
      exited: system.processes.ownExits,
      wedged: [...unresponsive, ...system.processes.wedged],
      stopSeconds: system.processes.stopSeconds,
    },
    deadTuples,
    system.homeReplicaOf,
  );
}
