/** `npm run bench -- <name>…` runs the named benchmarks (all of them when none is named). */
import { benchCreate } from './create.ts';
import { benchE2e } from './e2e.ts';
import { benchEvents } from './events.ts';
import { benchRealtime } from './realtime.ts';
import { benchWatermark } from './watermark.ts';

const benchmarks: Record<string, () => Promise<void>> = {
  create: benchCreate,
  events: benchEvents,
  e2e: benchE2e,
  realtime: benchRealtime,
  watermark: benchWatermark,
};

const requested = process.argv.slice(2);
const names = requested.length > 0 ? requested : Object.keys(benchmarks);
for (const name of names) {
  const run = benchmarks[name];
  if (!run) {
    console.error(`unknown benchmark "${name}"; known: ${Object.keys(benchmarks).join(', ')}`);
    process.exit(2);
  }
  await run();
}
process.exit(0);
