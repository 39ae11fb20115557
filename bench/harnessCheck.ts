/**
 * `npm run bench -- harness`: TDP's adapter for the independent queue benchmark (bench/harness/), run
 * here as that harness runs it, to show it still keeps the harness's contract: the descriptor first,
 * JSON lines only on stdout, every required metric at each tick, jobs created for the `ENQUEUE` tokens
 * on stdin and finished, and an exit 0 within 5 s of SIGTERM. It prints the adapter's last figures (the
 * harness itself, and pg-boss beside it, are for docs/benchmarks.md's runs).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { benchDatabase, sane, sized } from './support.ts';

const seconds = sized('BENCH_HARNESS_SECONDS', 30, 8);
const rate = 100;
const required = [
  'claim_p50_ms',
  'claim_p95_ms',
  'claim_p99_ms',
  'enqueue_rate',
  'completion_rate',
  'queue_depth',
];

interface Line {
  kind?: string;
  metric?: string;
  value?: number;
  window_s?: number;
  t?: string;
}

export async function benchHarness(): Promise<void> {
  console.log(`harness: TDP's adapter alone for ${seconds} s, ENQUEUE tokens at ${rate}/s, 1 s ticks`);
  const database = await benchDatabase();
  const child = spawn(
    process.execPath,
    ['--conditions=@tdp/source', '--import', 'tsx', 'bench/harness/tdpAdapter.ts'],
    {
      env: {
        ...process.env,
        DATABASE_URL: database.url,
        PRODUCER_MODE: 'fixed',
        PRODUCER_PACING: 'harness',
        PRODUCER_RATE: String(rate),
        SAMPLE_EVERY_S: '1',
        WORKER_COUNT: '32',
        JOB_WORK_MS: '1',
        BENCH_INSTANCE_ID: '0',
      },
      stdio: ['pipe', 'pipe', 'ignore'],
    },
  );
  const lines: Line[] = [];
  const notJson: string[] = [];
  createInterface({ input: child.stdout! }).on('line', (text) => {
    try {
      lines.push(JSON.parse(text) as Line);
    } catch {
      notJson.push(text);
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  try {
    const deadline = Date.now() + 60_000;
    while (lines.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    sane(lines[0]?.kind === 'descriptor', 'the adapter printed its descriptor first');
    // The harness's pacer: a token every 25 ms, crediting the rate on elapsed time.
    let sent = 0;
    const startedAt = performance.now();
    const pacer = setInterval(() => {
      const owed = Math.floor(((performance.now() - startedAt) / 1000) * rate) - sent;
      if (owed > 0) child.stdin!.write(`ENQUEUE ${owed}\n`);
      sent += Math.max(0, owed);
    }, 25);
    await new Promise((r) => setTimeout(r, seconds * 1000));
    clearInterval(pacer);
    const stopAt = performance.now();
    child.kill('SIGTERM');
    const code = await Promise.race([exited, new Promise<'late'>((r) => setTimeout(() => r('late'), 5_000))]);
    const stopMs = performance.now() - stopAt;
    sane(code === 0, `exit 0 within 5 s of SIGTERM (got ${code})`);
    sane(notJson.length === 0, `stdout is JSON lines only (${notJson[0] ?? ''})`);
    const samples = lines.filter((l) => l.kind === 'adapter');
    const last = (metric: string) => samples.filter((s) => s.metric === metric).at(-1);
    for (const metric of required) sane(last(metric) !== undefined, `the adapter reported ${metric}`);
    const enqueued = samples
      .filter((s) => s.metric === 'enqueue_rate')
      .reduce((sum, s) => sum + (s.value ?? 0) * (s.window_s ?? 0), 0);
    const completed = samples
      .filter((s) => s.metric === 'completion_rate')
      .reduce((sum, s) => sum + (s.value ?? 0) * (s.window_s ?? 0), 0);
    sane(completed > 0, 'jobs were completed');
    console.log(
      `  tokens for ${sent} jobs; ${Math.round(enqueued)} created, ${Math.round(completed)} completed (from the samples); ` +
        `claim p99 ${last('claim_p99_ms')!.value} ms at the last tick; exit 0 ${stopMs.toFixed(0)} ms after SIGTERM`,
    );
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await exited;
    await database.close();
  }
}
