/**
 * `npm run bench -- <name>…` runs the named benchmarks (all of them when none is named).
 * `BENCH_SMOKE=1` or `--smoke` (`npm run bench:smoke`) runs them at a small size without peers, and
 * exits non-zero if any of them throws or gives a broken result.
 */
import { benchCreate } from './create.ts';
import { benchE2e } from './e2e.ts';
import { benchEvents } from './events.ts';
import { benchFairness } from './fairness.ts';
import { benchGrowth } from './growth.ts';
import { benchHarness } from './harnessCheck.ts';
import { benchIsolation } from './isolation.ts';
import { benchMap } from './map.ts';
import { benchRealtime } from './realtime.ts';
import { smoke } from './support.ts';
import { benchSweep } from './sweep.ts';
import { benchWatermark } from './watermark.ts';
import { benchNames } from './zipNames.ts';

const benchmarks: Record<string, () => Promise<void>> = {
  create: benchCreate,
  events: benchEvents,
  growth: benchGrowth,
  sweep: benchSweep,
  e2e: benchE2e,
  map: benchMap,
  realtime: benchRealtime,
  watermark: benchWatermark,
  isolation: benchIsolation,
  names: benchNames,
  fairness: benchFairness,
  harness: benchHarness,
};

const requested = process.argv.slice(2).filter((arg) => arg !== '--smoke');
const names = requested.length > 0 ? requested : Object.keys(benchmarks);
const unknown = names.filter((name) => !benchmarks[name]);
if (unknown.length > 0) {
  console.error(`unknown benchmark "${unknown[0]}"; known: ${Object.keys(benchmarks).join(', ')}`);
  process.exit(2);
}
if (smoke) console.log('SMOKE RUN: small sizes, no peers; its figures only show that each bench works\n');
const outcomes: string[] = [];
for (const name of names) {
  const started = performance.now();
  try {
    await benchmarks[name]!();
    outcomes.push(`${name} ok`);
  } catch (error) {
    // A full run stops at its first failure; a smoke run tries every bench, then fails.
    if (!smoke) throw error;
    console.error(`${name} FAILED:`, error);
    outcomes.push(`${name} FAILED`);
  }
  outcomes[outcomes.length - 1] += ` (${((performance.now() - started) / 1000).toFixed(0)} s)`;
  if (smoke) console.log('');
}
if (smoke) console.log(`smoke: ${outcomes.join(', ')} — smoke figures, not to be compared`);
process.exit(outcomes.some((o) => o.includes('FAILED')) ? 1 : 0);
