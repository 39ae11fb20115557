/**
 * `npm run bench -- isolation`: what running attempts in capability runners (child processes) costs.
 *
 * - No-op attempts: 2,000 one after another, then 2,000 ten at a time, through a runner pool, against the
 *   floor — the same capability called in the worker's own process. The difference per attempt is the
 *   isolation's whole cost for a step that does nothing.
 * - `image.watermark@1` on a ZIP of 100 JPEGs of 1920×1080: in a runner against in the worker's process,
 *   alternately, best of three each (the capability's own reads and writes, through the same context).
 */
import { copyFile, mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { imageWatermark } from '../packages/capabilities/src/imageWatermark.ts';
import { builtinCapabilityModule } from '../packages/capabilities/src/index.ts';
import { inProcess, RunnerPool } from '../packages/worker/src/isolation/runnerPool.ts';
import type { Capability, CapabilityContext } from '../packages/worker/src/sdk.ts';
import { sane, sized } from './support.ts';
import { writePhotosZip } from './watermark.ts';

const noopCount = sized('BENCH_ISOLATION_COUNT', 2_000, 100);
const imageCount = sized('BENCH_ISOLATION_IMAGES', 100, 10);

/** A context whose files are local: `download` copies the source in, `upload` only measures. */
function benchContext(directory: string, attempt: number, source: string): CapabilityContext {
  const workDirectory = join(directory, `attempt-${attempt}`);
  return {
    attemptId: `bench-${attempt}`,
    taskId: 'bench',
    stepKey: 'only',
    stepId: 'only',
    attempt: 1,
    checkpoint: null,
    workDirectory,
    signal: new AbortController().signal,
    progress: () => {},
    saveCheckpoint: () => {},
    log: { info: () => {}, warn: () => {}, error: () => {} },
    download: async () => {
      await mkdir(workDirectory, { recursive: true });
      const path = join(workDirectory, 'input.zip');
      await copyFile(source, path);
      return path;
    },
    allocateOutput: async (spec) => {
      const path = join(workDirectory, 'output.zip');
      return {
        path,
        resourceRef: spec.relativePath,
        upload: async () => ({ resourceRef: spec.relativePath, bytes: (await stat(path)).size }),
      };
    },
  };
}

export async function benchIsolation(): Promise<void> {
  const directory = await mkdtemp(join(tmpdir(), 'tdp-bench-isolation-'));
  const pool = new RunnerPool({ module: new URL('./isolationCapabilities.ts', import.meta.url) });
  const images = new RunnerPool({ module: builtinCapabilityModule });
  try {
    const { noop } = await import('./isolationCapabilities.ts');
    await pool.warm();
    const attempts = async (runners: typeof inProcess, concurrency: number) => {
      let next = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < noopCount) {
            const n = next++;
            const output = await runners.run(noop as Capability, benchContext(directory, n, ''), { n });
            sane((output as { n: number }).n === n, 'a no-op attempt answers its own input');
          }
        }),
      );
      return ((performance.now() - started) * 1000) / noopCount;
    };
    // Warm both (the runners' modules, the JIT), then measure.
    await attempts(pool, 10);
    await attempts(inProcess, 10);
    console.log(`isolation: ${noopCount} no-op attempts through capability runners, then image.watermark`);
    for (const concurrency of [1, 10]) {
      const isolated = await attempts(pool, concurrency);
      const floor = await attempts(inProcess, concurrency);
      console.log(
        `  no-op, ${String(concurrency).padStart(2)} at a time   runner ${isolated.toFixed(0).padStart(6)} µs/attempt   in-process floor ${floor.toFixed(1).padStart(6)} µs   overhead ${(isolated - floor).toFixed(0)} µs/attempt`,
      );
    }

    const source = join(directory, 'photos.zip');
    await writePhotosZip(source, imageCount);
    const input = { source: 'photos.zip', text: '机密 Confidential', opacity: 0.5 };
    const watermark = async (runners: typeof inProcess, run: number) => {
      const started = performance.now();
      const output = (await runners.run(
        imageWatermark as Capability,
        benchContext(directory, 10_000 + run, source),
        input,
      )) as { watermarked: number };
      sane(output.watermarked === imageCount, 'every image was watermarked');
      await rm(join(directory, `attempt-${10_000 + run}`), { recursive: true, force: true });
      return imageCount / ((performance.now() - started) / 1000);
    };
    await images.warm();
    await watermark(images, 0);
    await watermark(inProcess, 0);
    const isolated: number[] = [];
    const floors: number[] = [];
    for (let run = 1; run <= 3; run += 1) {
      isolated.push(await watermark(images, run));
      floors.push(await watermark(inProcess, run));
    }
    const ours = Math.max(...isolated);
    const floor = Math.max(...floors);
    console.log(`  image.watermark in a runner         ${ours.toFixed(1).padStart(6)} images/s`);
    console.log(`  floor: in the worker's own process  ${floor.toFixed(1).padStart(6)} images/s`);
    console.log(`  ratio runner / in-process           ${(ours / floor).toFixed(3)}  (target >= 0.97)`);
  } finally {
    await pool.close();
    await images.close();
    await rm(directory, { recursive: true, force: true });
  }
}
