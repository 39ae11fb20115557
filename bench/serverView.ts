/**
 * A TDP server's own view of a window of a benchmark, from its Prometheus metrics scraped before and
 * after: how long its creates took inside the server, how long its status transactions waited for a
 * connection, worked and committed, its GC pauses and its event loop's delay. `bench -- e2e` prints it
 * for the steady phase, to say where a submit → start tail comes from. Quantiles of histograms are the
 * upper bound of the bucket they fall in ("≤ 5 ms").
 */

/** One scrape: each series (name and labels, as printed) and its value. */
export type Scrape = Map<string, number>;

export async function scrapeMetrics(base: string): Promise<Scrape> {
  const response = await fetch(`${base}/metrics`);
  if (!response.ok) throw new Error(`GET /metrics answered ${response.status}`);
  const series: Scrape = new Map();
  for (const line of (await response.text()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    series.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return series;
}

/** The window's counts per bucket (`le`, cumulative) of a histogram's series whose labels hold `match`. */
function bucketDeltas(before: Scrape, after: Scrape, name: string, match: string): [number, number][] {
  const counts = new Map<number, number>();
  for (const [key, value] of after) {
    if (!key.startsWith(`${name}_bucket{`) || !key.includes(match)) continue;
    const le = /le="([^"]+)"/.exec(key)?.[1];
    if (le === undefined) continue;
    const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
    counts.set(bound, (counts.get(bound) ?? 0) + value - (before.get(key) ?? 0));
  }
  return [...counts].sort((a, b) => a[0] - b[0]);
}

/** The bucket bound (in ms) under which `q` of the window's observations fall; null with none. */
function quantileMs(buckets: [number, number][], q: number): number | null {
  const total = buckets.at(-1)?.[1] ?? 0;
  if (total === 0) return null;
  const bucket = buckets.find(([, count]) => count >= q * total);
  return bucket ? bucket[0] * 1000 : null;
}

const shown = (ms: number | null) =>
  ms === null ? '–' : Number.isFinite(ms) ? `≤ ${ms} ms` : '> the last bucket';

function sumDelta(before: Scrape, after: Scrape, key: string): number {
  return (after.get(key) ?? 0) - (before.get(key) ?? 0);
}

/** The lines `bench -- e2e` prints for the window between the two scrapes. */
export function describeServerView(before: Scrape, after: Scrape): string[] {
  const creates = bucketDeltas(before, after, 'tdp_http_request_duration_seconds', 'route="/v1/tasks"');
  const phase = (name: string) =>
    bucketDeltas(before, after, 'tdp_fact_transaction_seconds', `phase="${name}"`);
  const gc = bucketDeltas(before, after, 'tdp_nodejs_gc_duration_seconds', '');
  const gcSeconds = [...after.keys()]
    .filter((key) => key.startsWith('tdp_nodejs_gc_duration_seconds_sum'))
    .reduce((sum, key) => sum + sumDelta(before, after, key), 0);
  // prom-client samples the loop every 10 ms and records each whole interval: the delay is the excess.
  const lag = (name: string) =>
    Math.max(0, (after.get(`tdp_nodejs_eventloop_lag_${name}_seconds`) ?? 0) * 1000 - 10).toFixed(1);
  return [
    `  (server: POST /v1/tasks p50 ${shown(quantileMs(creates, 0.5))}, p99 ${shown(quantileMs(creates, 0.99))}; ` +
      `status transactions p99: connection ${shown(quantileMs(phase('queue'), 0.99))}, ` +
      `work ${shown(quantileMs(phase('work'), 0.99))}, commit ${shown(quantileMs(phase('commit'), 0.99))})`,
    `  (server: ${gc.at(-1)?.[1] ?? 0} GC pauses, ${(gcSeconds * 1000).toFixed(0)} ms in all, p99 ${shown(quantileMs(gc, 0.99))}; ` +
      `event loop delay beyond its 10 ms sampling p50 ${lag('p50')} ms, p99 ${lag('p99')} ms, max ${lag('max')} ms)`,
  ];
}
