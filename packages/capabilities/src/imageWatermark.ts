/**
 * `image.watermark`: a text (1–100 characters, any script: Noto Sans SC ships with the worker, so
 * Chinese renders) over every JPEG, PNG and WebP of a ZIP, scaled to each image. Each image keeps its
 * format and is turned upright first (EXIF orientation). Other files pass untouched; an image that is
 * corrupt or over the pixel limit is copied unchanged and listed in the report, never a crash.
 *
 * Decompression bombs: a PNG of a few hundred bytes can declare 100000 × 100000 pixels, 40 GB decoded.
 * Each image's format is taken from its first bytes (only JPEG, PNG and WebP reach the decoder at all)
 * and its dimensions from its header; one over the worker's pixel limit is refused before any pixel is
 * decoded, and the decoder is given the same limit as a second guard.
 */
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { pipeline } from 'node:stream/promises';
import { CapabilityError, defineCapability } from '@tdp/worker';
import sharp from 'sharp';
import { Type } from 'typebox';
import yazl from 'yazl';
import {
  type ArchiveLimits,
  damagedArchive,
  defaultArchiveLimits,
  openArchive,
  openEntry,
  readEntry,
  type Scanned,
  scanArchive,
  zipToZip,
} from './zip.ts';

/** Noto Sans SC (OFL-1.1): Latin, Chinese, Japanese kana; shipped as an npm dependency. */
export const watermarkFont = createRequire(import.meta.url).resolve(
  '@expo-google-fonts/noto-sans-sc/400Regular/NotoSansSC_400Regular.ttf',
);
const fontFamily = 'Noto Sans SC';

export type WatermarkPosition = 'center' | 'top-left' | 'top-right' | 'bottom-left' | 'bottom-right';

export interface WatermarkOptions {
  text: string;
  position?: WatermarkPosition;
  /** 0–1 (default 0.5). */
  opacity?: number;
  /** The text's width as a fraction of the image's width (default 0.4). */
  size?: number;
  /** `#rrggbb` (default white). */
  color?: string;
  /** Images over these limits are copied unchanged (default: `defaultImageLimits`). */
  limits?: ImageLimits;
}

/** What a worker lets one image cost. */
export interface ImageLimits {
  /** Width × height above which an image is refused undecoded: 50 MP is 200 MB as RGBA. */
  maxPixels: number;
  /**
   * Width or height above which an image is refused undecoded. The decoder works in strips of full
   * rows, so its memory follows the width: a 9,900,000 × 5 PNG (145 KB, under the pixel limit) took
   * 0.5 GB. 65,535 is the most a JPEG can have; no camera or scanner writes wider.
   */
  maxSide: number;
}

export const defaultImageLimits: ImageLimits = { maxPixels: 50_000_000, maxSide: 65_535 };

/** Why an image is copied unwatermarked: the reason and message of its outcome. */
export class ImageRefusal extends Error {
  constructor(
    readonly reason: 'CORRUPT' | 'TOO_LARGE',
    message: string,
  ) {
    super(message);
  }
}

export type FileOutcome =
  | { path: string; status: 'WATERMARKED'; format: string }
  | { path: string; status: 'SKIPPED' }
  | { path: string; status: 'FAILED'; reason: 'CORRUPT' | 'TOO_LARGE'; message: string };

const imageExtensions = /\.(jpe?g|png|webp)$/i;

type ImageFormat = 'jpeg' | 'png' | 'webp';

/** The format from the file's signature, or null for anything else (SVG, TIFF, GIF… named .png). */
export function sniffFormat(input: Buffer): ImageFormat | null {
  if (input.subarray(0, 3).equals(Buffer.from([0xff, 0xd8, 0xff]))) return 'jpeg';
  if (input.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])))
    return 'png';
  if (input.toString('latin1', 0, 4) === 'RIFF' && input.toString('latin1', 8, 12) === 'WEBP') return 'webp';
  return null;
}

const megapixels = (pixels: number) => `${Math.round(pixels / 100_000) / 10} megapixels`;

/**
 * The format and dimensions from the image's header, nothing decoded; throws an ImageRefusal for a file
 * that is not a JPEG, PNG or WebP, a header that cannot be read, or dimensions over `limits`.
 */
export async function readImageHeader(
  input: Buffer,
  limits: ImageLimits,
): Promise<{ format: ImageFormat; width: number; height: number; orientation: number }> {
  const format = sniffFormat(input);
  if (!format) throw new ImageRefusal('CORRUPT', 'not a JPEG, PNG or WebP');
  // limitInputPixels is off here only so that the header's own dimensions can be reported.
  const metadata = await sharp(input, { limitInputPixels: false })
    .metadata()
    .catch((error: Error) => {
      throw new ImageRefusal(
        'CORRUPT',
        `the ${format.toUpperCase()} header cannot be read: ${error.message}`,
      );
    });
  const { width, height } = metadata;
  if (!width || !height || metadata.format !== format)
    throw new ImageRefusal('CORRUPT', `the ${format.toUpperCase()} header cannot be read`);
  if (width * height > limits.maxPixels)
    throw new ImageRefusal(
      'TOO_LARGE',
      `declares ${width} × ${height} pixels (${megapixels(width * height)}); the limit is ${megapixels(limits.maxPixels)}`,
    );
  if (Math.max(width, height) > limits.maxSide)
    throw new ImageRefusal(
      'TOO_LARGE',
      `declares ${width} × ${height} pixels; the limit is ${limits.maxSide} pixels a side`,
    );
  return { format, width, height, orientation: metadata.orientation ?? 1 };
}

/** Counts code points, so that 机密 is two characters, as a person counts them. */
export function checkWatermarkText(text: string): string | null {
  const length = Array.from(text.trim()).length;
  if (length < 1 || length > 100) return `the watermark text must have 1 to 100 characters, not ${length}`;
  return null;
}

const escapeMarkup = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The text as an RGBA image fitted into `width` × `height`. */
export async function renderText(
  text: string,
  width: number,
  height: number,
  options: { opacity?: number; color?: string } = {},
): Promise<sharp.OutputInfo & { data: Buffer }> {
  const color = /^#[0-9a-fA-F]{6}$/.test(options.color ?? '') ? options.color! : '#ffffff';
  const alpha = Math.round(Math.min(1, Math.max(0, options.opacity ?? 0.5)) * 100);
  const { data, info } = await sharp({
    text: {
      text: `<span foreground="${color}" fgalpha="${Math.max(1, alpha)}%">${escapeMarkup(text.trim())}</span>`,
      font: fontFamily,
      fontfile: watermarkFont,
      width: Math.max(1, Math.round(width)),
      height: Math.max(1, Math.round(height)),
      // One line, as large as fits the box.
      wrap: 'none',
      rgba: true,
    },
  })
    .png()
    .toBuffer({ resolveWithObject: true });
  return { ...info, data };
}

type Overlay = Awaited<ReturnType<typeof renderText>>;

/**
 * Watermarks one image; throws for a corrupt one or one over the pixel limit. `overlays` caches the
 * rendered text per image size (a ZIP of photos from one camera renders it once).
 */
export async function watermarkImage(
  input: Buffer,
  options: WatermarkOptions,
  overlays: Map<string, Promise<Overlay>> = new Map(),
): Promise<{ data: Buffer; format: string }> {
  const limits = options.limits ?? defaultImageLimits;
  const header = await readImageHeader(input, limits);
  const format = header.format;
  const image = sharp(input, { limitInputPixels: limits.maxPixels, failOn: 'error' });
  // Upright dimensions: orientations 5–8 swap width and height.
  const swap = header.orientation >= 5;
  const width = swap ? header.height : header.width;
  const height = swap ? header.width : header.height;
  const size = Math.min(0.95, Math.max(0.05, options.size ?? 0.4));
  // A one-line box: as wide as asked, and no taller than a third of that.
  const key = `${width}x${height}`;
  let rendering = overlays.get(key);
  if (!rendering) {
    rendering = renderText(options.text, width * size, Math.min(height * size, width * size * 0.3), options);
    overlays.set(key, rendering);
  }
  const overlay = await rendering;
  const margin = Math.round(Math.min(width, height) * 0.03);
  const position = options.position ?? 'center';
  const left =
    position === 'center'
      ? Math.round((width - overlay.width) / 2)
      : position.endsWith('left')
        ? margin
        : width - overlay.width - margin;
  const top =
    position === 'center'
      ? Math.round((height - overlay.height) / 2)
      : position.startsWith('top')
        ? margin
        : height - overlay.height - margin;
  const composed = image
    .rotate()
    .composite([{ input: overlay.data, left: Math.max(0, left), top: Math.max(0, top) }]);
  const encoded =
    format === 'jpeg'
      ? composed.jpeg({ quality: 90 })
      : format === 'png'
        ? composed.png()
        : composed.webp({ quality: 90 });
  return { data: await encoded.toBuffer(), format };
}

/**
 * Watermarks the images of the ZIP at `sourcePath` into `targetPath` (atomically), `concurrency` images
 * at a time, entries kept in their order. Returns one outcome per file.
 */
export async function watermarkArchive(
  sourcePath: string,
  targetPath: string,
  options: WatermarkOptions,
  run: {
    concurrency?: number;
    limits?: ArchiveLimits;
    onProgress?: (fraction: number) => void;
    signal?: AbortSignal;
  } = {},
): Promise<FileOutcome[]> {
  const problem = checkWatermarkText(options.text);
  if (problem) throw new CapabilityError('WATERMARK_TEXT_INVALID', problem, { category: 'INPUT' });
  const zip = await openArchive(sourcePath);
  const temporary = `${targetPath}.partial`;
  try {
    const entries = (await scanArchive(zip, run.limits ?? defaultArchiveLimits)).entries.filter(
      (e) => !e.isDirectory,
    );
    const output = new yazl.ZipFile();
    const written = pipeline(output.outputStream, createWriteStream(temporary));
    // A file that is not an image is streamed from the source when yazl comes to it, never held in
    // memory; a read error of its stream (or yazl's, for a size that lies) fails the archive here.
    let failCopy: (error: Error) => void = () => {};
    const copyFailed = new Promise<never>((_, reject) => {
      failCopy = reject;
    });
    copyFailed.catch(() => {});
    output.on('error', failCopy);
    const outcomes: FileOutcome[] = [];
    /** `data` null: copied as it is, streamed. */
    type Done = { scanned: Scanned; data: Buffer | null; outcome: FileOutcome };
    // Entries in their order; each slot settles when its image is done. `concurrency` images are being
    // worked on at any time (a finished one waiting for an earlier one to be written does not count).
    const window: { result: Promise<Done>; settled: boolean }[] = [];
    const concurrency = Math.max(1, run.concurrency ?? 2);
    const overlays = new Map<string, Promise<Overlay>>();
    let running = 0;
    let slotFreed: (() => void) | null = null;
    let done = 0;
    const flushOne = async () => {
      const { scanned, data, outcome } = await window.shift()!.result;
      const mtime = scanned.entry.getLastModDate();
      // Already-compressed images are stored, not deflated again.
      if (data) output.addBuffer(data, scanned.path, { mtime, compress: false });
      else
        output.addReadStreamLazy(
          scanned.path,
          { mtime, size: scanned.entry.uncompressedSize },
          (callback) => {
            openEntry(zip, scanned.entry).then(
              (stream) => {
                stream.on('error', failCopy);
                callback(null, stream);
              },
              (error: Error) => failCopy(error),
            );
          },
        );
      outcomes.push(outcome);
      done += 1;
      run.onProgress?.(done / entries.length);
    };
    const flushSettled = async () => {
      while (window[0]?.settled) await flushOne();
    };
    try {
      for (const scanned of entries) {
        run.signal?.throwIfAborted();
        // Wait for a free slot (and keep at most a few finished images in memory), writing what is done.
        while (running >= concurrency || window.length >= concurrency * 4) {
          await new Promise<void>((resolve) => {
            slotFreed = resolve;
          });
          await flushSettled();
        }
        const isImage = imageExtensions.test(scanned.path);
        const original = isImage ? await readEntry(zip, scanned.entry) : null;
        running += 1;
        const slot = { settled: false, result: null as unknown as Promise<Done> };
        window.push(slot);
        slot.result = (async (): Promise<Done> => {
          if (!original) return { scanned, data: null, outcome: { path: scanned.path, status: 'SKIPPED' } };
          try {
            const { data, format } = await watermarkImage(original, options, overlays);
            return { scanned, data, outcome: { path: scanned.path, status: 'WATERMARKED', format } };
          } catch (error) {
            const message = (error as Error).message;
            const reason = error instanceof ImageRefusal ? error.reason : 'CORRUPT';
            return {
              scanned,
              data: original,
              outcome: { path: scanned.path, status: 'FAILED', reason, message },
            };
          }
        })().finally(() => {
          slot.settled = true;
          running -= 1;
          const wake = slotFreed;
          slotFreed = null;
          wake?.();
        });
        await flushSettled();
      }
      while (window.length > 0) await flushOne();
      output.end();
      await Promise.race([written, copyFailed]);
      await rename(temporary, targetPath);
      return outcomes;
    } catch (error) {
      (output.outputStream as unknown as { destroy(): void }).destroy();
      await written.catch(() => {});
      await Promise.allSettled(window.map((slot) => slot.result));
      throw error instanceof CapabilityError || (error as Error).name === 'AbortError'
        ? error
        : damagedArchive(error);
    }
  } finally {
    await rm(temporary, { force: true });
    zip.close();
  }
}

const Outcome = Type.Object({
  path: Type.String(),
  status: Type.String(),
  format: Type.Optional(Type.String()),
  reason: Type.Optional(Type.String()),
  message: Type.Optional(Type.String()),
});

/** The capability, with the worker's limits on what one image may cost. */
export const createImageWatermark = (limits: ImageLimits = defaultImageLimits) =>
  defineCapability({
    name: 'image.watermark',
    version: '1',
    // CPU-bound: as many at once as the machine has CPUs, unless the worker is told otherwise.
    maxConcurrency: Math.max(1, availableParallelism()),
    input: Type.Object(
      {
        source: Type.String({ minLength: 1, description: "the source ZIP's resource reference" }),
        text: Type.String({ minLength: 1, maxLength: 400 }),
        position: Type.Optional(
          Type.Union(
            ['center', 'top-left', 'top-right', 'bottom-left', 'bottom-right'].map((p) => Type.Literal(p)),
          ),
        ),
        opacity: Type.Optional(Type.Number({ minimum: 0.05, maximum: 1 })),
        size: Type.Optional(Type.Number({ minimum: 0.05, maximum: 0.95 })),
        color: Type.Optional(Type.String({ pattern: '^#[0-9a-fA-F]{6}$' })),
        outputPath: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
        maxOutputBytes: Type.Optional(Type.Integer({ minimum: 1 })),
      },
      { additionalProperties: false },
    ),
    output: Type.Object({
      archive: Type.String(),
      files: Type.Array(Outcome),
      watermarked: Type.Integer(),
      failed: Type.Integer(),
      skipped: Type.Integer(),
    }),
    async run(ctx, input) {
      const problem = checkWatermarkText(input.text);
      if (problem) throw new CapabilityError('WATERMARK_TEXT_INVALID', problem, { category: 'INPUT' });
      const { archive, result: files } = await zipToZip(
        ctx,
        input,
        { outputPath: 'watermark/archive.zip', phase: 'watermark' },
        (source, target, onProgress) =>
          watermarkArchive(
            source,
            target,
            {
              text: input.text,
              ...(input.position ? { position: input.position as WatermarkPosition } : {}),
              ...(input.opacity !== undefined ? { opacity: input.opacity } : {}),
              ...(input.size !== undefined ? { size: input.size } : {}),
              ...(input.color ? { color: input.color } : {}),
              limits,
            },
            { concurrency: 2, onProgress, signal: ctx.signal },
          ),
      );
      const count = (status: FileOutcome['status']) => files.filter((f) => f.status === status).length;
      return {
        archive,
        files,
        watermarked: count('WATERMARKED'),
        failed: count('FAILED'),
        skipped: count('SKIPPED'),
      };
    },
  });

export const imageWatermark = createImageWatermark();
