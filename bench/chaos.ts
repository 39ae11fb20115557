/**
 * `npm run chaos [-- <scenario>…]`: the chaos suite. Each scenario (bench/chaos/faults.ts) runs on TDP —
 * two `tdp server` replicas, two workers — and on pg-boss and graphile-worker (two worker processes
 * each), on the suite's own PostgreSQL, with jobs submitted at a fixed rate by a client that retries
 * with the same key; each job is a short sleep, so the run measures the platform, not the work. It
 * prints one table, writes artifacts/chaos.json (the exits with the errors they died of) and exits
 * non-zero when TDP lost, duplicated or gapped a task or one of its processes exited or wedged.
 *
 * `--smoke` (or CHAOS_SMOKE=1): the six process, connection and failover faults, short phases, TDP alone — for
 * `.ci/run`.
 * CHAOS_SYSTEMS=TDP,pg-boss picks the systems. `--wide` runs every chosen scenario at 50 jobs/s on
 * 2 workers × 64 slots with a 10 s fault (`terminate-storm-wide` is the terminate storm at that load).
 *
 * Drills run alone, by name (not part of a run without names): `gateway-node-loss` (a realtime node
 * SIGKILLed under 10,000 clients, on TDP's gateway and on Centrifugo: bench/gatewayNodeLoss.ts),
 * `redis-failover` (the Redis master killed, Sentinel promoting its replica: bench/redisFailover.ts) and
 * `restore-drill` (a backup under load, a point-in-time restore, the replay: bench/restoreDrill.ts);
 * `--smoke` makes each small.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { ChaosCluster } from './chaos/cluster.ts';
import { scenarios, wideLoad } from './chaos/faults.ts';
import { type Result, table, verdict } from './chaos/measure.ts';
import { startGraphile, startPgBoss } from './chaos/peers.ts';
import { exitReason } from './chaos/processes.ts';
import { runScenario, type StartSystem, type Timing } from './chaos/run.ts';
import type { SystemOptions } from './chaos/system.ts';
import { startTdp } from './chaos/tdp.ts';

const smoke = process.env.CHAOS_SMOKE === '1' || process.argv.includes('--smoke');

// Drills with their own set-up (gateway nodes and thousands of clients, Redis with Sentinel, a backup
// and a restore): they share nothing with the job systems' harness below, so each runs alone, by name,
// and prints its own table.
const drills: Record<string, () => Promise<boolean>> = {
  'gateway-node-loss': async () => {
    if (smoke && !process.argv.includes('--smoke')) process.argv.push('--smoke');
    return (await import('./gatewayNodeLoss.ts')).runGatewayNodeLoss();
  },
  'redis-failover': async () => (await import('./redisFailover.ts')).runRedisFailover({ smoke }),
  'restore-drill': async () => (await import('./restoreDrill.ts')).runRestoreDrill({ smoke }),
};
const drill = Object.keys(drills).find((name) => process.argv.includes(name));
if (drill) process.exit((await drills[drill]!()) ? 0 : 1);

const timing: Timing = smoke
  ? { steadyMs: 3_000, faultMs: 3_000, recoveryMs: 4_000, drainMs: 20_000, rate: 12 }
  : { steadyMs: 6_000, faultMs: 6_000, recoveryMs: 10_000, drainMs: 30_000, rate: 25 };
/**
 * What the two workers can do: 2 × concurrency / sleep — 32 jobs/s in a smoke run, 64 in a full one; the
 * steady rate stays well below, as a system's slot is held a little longer than the sleep.
 */
const options: SystemOptions = {
  sleepMs: Number(process.env.CHAOS_SLEEP_MS ?? 250),
  concurrency: Number(process.env.CHAOS_CONCURRENCY ?? (smoke ? 4 : 8)),
};
if (process.env.CHAOS_RATE) timing.rate = Number(process.env.CHAOS_RATE);

const systems: Record<string, StartSystem> = {
  TDP: startTdp,
  'pg-boss': startPgBoss,
  'graphile-worker': startGraphile,
};
const chosenSystems = (process.env.CHAOS_SYSTEMS ?? (smoke ? 'TDP' : Object.keys(systems).join(',')))
  .split(',')
  .filter(Boolean);
const named = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));
const unknown = [
  ...named.filter((n) => !scenarios.some((s) => s.name === n)),
  ...chosenSystems.filter((s) => !systems[s]),
];
if (unknown.length > 0) {
  console.error(
    `unknown "${unknown[0]}"; scenarios: ${scenarios.map((s) => s.name).join(', ')}; systems: ${Object.keys(systems).join(', ')}`,
  );
  process.exit(2);
}
/** The smoke's faults: those that hit processes and connections (the pressure ones run in a full run). */
const smokeScenarios = [
  'replica-kill',
  'worker-kills',
  'pg-restart',
  'pg-failover',
  'terminate-storm',
  'slots-full',
];
/** `--wide`: every chosen scenario at the load where the database faults once ended a replica. */
const wide = process.argv.includes('--wide');
const chosenScenarios = scenarios
  .filter((s) => (named.length > 0 ? named.includes(s.name) : !smoke || smokeScenarios.includes(s.name)))
  .map((s) => (wide ? { ...s, load: wideLoad } : s));

console.log(
  `chaos${smoke ? ' (SMOKE: short phases)' : ''} on ${chosenSystems.join(', ')}: ${timing.rate} jobs/s steady, ` +
    `phases ${timing.steadyMs / 1000} s steady / ${timing.faultMs / 1000} s fault / ${timing.recoveryMs / 1000} s recovery, ` +
    `jobs of ${options.sleepMs} ms on 2 workers × ${options.concurrency}`,
);
const cluster = await ChaosCluster.start();
const results: Result[] = [];
const started = Date.now();
try {
  for (const scenario of chosenScenarios) {
    console.log(`\n${scenario.name}: ${scenario.title}`);
    for (const name of chosenSystems) {
      const result = await runScenario(cluster, scenario, name, systems[name]!, timing, options);
      results.push(result);
      const exits = result.exited.map((e) => `${e.name} exited (${e.code ?? e.signal}): ${exitReason(e)}`);
      console.log(
        `  ${name.padEnd(15)} ${result.finished}/${result.accepted} finished, ${result.lost} lost, ${result.duplicated} dup, ` +
          `${result.exited.length} exited, ${result.wedged.length} wedged; ` +
          `p99 submit→accepted ${result.acceptP99.before ?? '—'}/${result.acceptP99.during ?? '—'}/${result.acceptP99.after ?? '—'} ms` +
          (result.replicaP99
            ? `; p99 before, accepted by the worker's replica / by the other ${result.replicaP99.same ?? '—'}/${result.replicaP99.other ?? '—'} ms`
            : '') +
          `${exits.length ? `\n    ${exits.join('\n    ')}` : ''}` +
          `${result.wedged.length ? `\n    wedged: ${result.wedged.join(', ')}` : ''}`,
      );
    }
  }
} finally {
  await cluster.close();
}

console.log(`\n${table(results)}\n`);
const tdpMisses = results
  .filter((r) => r.system === 'TDP')
  .map((r) => [r.scenario, verdict(r)] as const)
  .filter(([, misses]) => misses.length > 0);
for (const [scenario, misses] of tdpMisses)
  console.log(`TDP misses a target in ${scenario}: ${misses.join('; ')}`);
mkdirSync('artifacts', { recursive: true });
writeFileSync(
  `artifacts/chaos${smoke ? '-smoke' : ''}.json`,
  `${JSON.stringify({ smoke, timing, options, results }, null, 2)}\n`,
);
console.log(
  `chaos: ${results.length} runs in ${((Date.now() - started) / 1000).toFixed(0)} s; artifacts/chaos${smoke ? '-smoke' : ''}.json, logs in artifacts/chaos-logs/`,
);
// Failing the run: what the smoke guards — TDP losing, duplicating or gapping a task, or a TDP process
// exiting or wedging. (Timing targets are reported above, not enforced: they depend on the machine.)
const broken = results.some(
  (r) =>
    r.system === 'TDP' &&
    ((r.lost > 0 && !r.lossByDesign) ||
      r.duplicated !== 0 ||
      (r.versionGaps ?? 0) > 0 ||
      r.exited.length > 0 ||
      r.wedged.length > 0),
);
process.exit(broken ? 1 : 0);
