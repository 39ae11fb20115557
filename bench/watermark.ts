/**
 * `npm run bench -- watermark`: images per second through the `image.watermark` capability's core (ZIP in,
 * ZIP out, 2 images at a time) on 500 JPEGs of 1920×1080, and in the same run the floor: a plain sharp
 * loop doing the same composite on the same JPEGs, 2 at a time, from memory to memory.
 * `BENCH_WATERMARK_COUNT` changes the number of images.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import yazl from 'yazl';
import { renderText, watermarkArchive } from '../packages/capabilities/src/imageWatermark.ts';
import { sized } from './support.ts';

const count = sized('BENCH_WATERMARK_COUNT', 500, 20);
const width = 1920;
const height = 1080;
const text = '机密 Confidential';

/** A photo-like JPEG: smooth gradients plus noise, so that it compresses like a real one. */
async function photo(seed: number): Promise<Buffer> {
  const raw = Buffer.alloc(width * height * 3);
  let state = seed * 2654435761;
  for (let y = 0; y < height; y += 1)
    for (let x = 0; x < width; x += 1) {
      state = (state * 1103515245 + 12345) & 0x7fffffff;
      const noise = state % 24;
      const i = (y * width + x) * 3;
      raw[i] = (x / 8 + seed * 17 + noise) & 255;
      raw[i + 1] = (y / 5 + noise) & 255;
      raw[i + 2] = ((x + y) / 12 + seed * 5) & 255;
    }
  return sharp(raw, { raw: { width, height, channels: 3 } })
    .jpeg({ quality: 85 })
    .toBuffer();
}

async function inParallel<T>(items: T[], concurrency: number, work: (item: T) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

/**
 * A ZIP of `count` photo-like JPEGs at `path`: 25 distinct photos, used again and again, so that there are
 * hundreds of files of realistic size without minutes of encoding.
 */
export async function writePhotosZip(
  path: string,
  count: number,
): Promise<{ files: Buffer[]; bytes: number }> {
  const distinct = await Promise.all(Array.from({ length: Math.min(25, count) }, (_, i) => photo(i + 1)));
  const files = Array.from({ length: count }, (_, i) => distinct[i % distinct.length]!);
  const zip = new yazl.ZipFile();
  for (const [i, file] of files.entries())
    zip.addBuffer(file, `photos/${String(i).padStart(4, '0')}.jpg`, { compress: false });
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
  const archive = Buffer.concat(chunks);
  await writeFile(path, archive);
  return { files, bytes: archive.length };
}

export async function benchWatermark(): Promise<void> {
  const directory = await mkdtemp(join(tmpdir(), 'tdp-bench-watermark-'));
  try {
    const source = join(directory, 'photos.zip');
    const { files, bytes } = await writePhotosZip(source, count);
    const megabytes = (bytes / 2 ** 20).toFixed(0);
    console.log(
      `watermark: ${count} JPEGs of ${width}×${height} (${megabytes} MB zipped), 2 at a time, text "${text}"`,
    );

    // The floor: the same overlay, composited onto each JPEG and encoded as the capability does.
    const floor = async () => {
      const overlay = await renderText(text, width * 0.4, Math.min(height * 0.4, width * 0.4 * 0.3), {
        opacity: 0.5,
      });
      const left = Math.round((width - overlay.width) / 2);
      const top = Math.round((height - overlay.height) / 2);
      const started = performance.now();
      await inParallel(files, 2, async (file) => {
        await sharp(file)
          .rotate()
          .composite([{ input: overlay.data, left, top }])
          .jpeg({ quality: 90 })
          .toBuffer();
      });
      return count / ((performance.now() - started) / 1000);
    };
    const capability = async (run: number) => {
      const started = performance.now();
      const outcomes = await watermarkArchive(
        source,
        join(directory, `out-${run}.zip`),
        { text, opacity: 0.5 },
        {
          concurrency: 2,
        },
      );
      const seconds = (performance.now() - started) / 1000;
      if (outcomes.filter((o) => o.status === 'WATERMARKED').length !== count)
        throw new Error('not every image was watermarked');
      return count / seconds;
    };
    // Warm both paths once (sharp's thread pool, the font), then measure them alternately.
    await floor();
    await capability(0);
    const floors: number[] = [];
    const capabilities: number[] = [];
    for (let run = 1; run <= 2; run += 1) {
      floors.push(await floor());
      capabilities.push(await capability(run));
    }
    const best = (values: number[]) => Math.max(...values);
    const ours = best(capabilities);
    const plain = best(floors);
    console.log(`  image.watermark (ZIP in, ZIP out)   ${ours.toFixed(1).padStart(6)} images/s`);
    console.log(`  floor: plain sharp loop in memory   ${plain.toFixed(1).padStart(6)} images/s`);
    console.log(`  ratio capability / floor           ${(ours / plain).toFixed(2)}  (target >= 0.85)`);
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}
