import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import {
  checkWatermarkText,
  defaultImageLimits,
  readImageHeader,
  renderText,
  watermarkArchive,
  watermarkImage,
} from '../src/imageWatermark.ts';
import { bombPng } from './images.ts';
import { readZip, writeRawZip, writeZip } from './zips.ts';

const directory = mkdtempSync(join(tmpdir(), 'tdp-watermark-'));
const gray = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 3, background: { r: 60, g: 60, b: 60 } } });
const pixels = async (image: Buffer) =>
  sharp(image).removeAlpha().raw().toBuffer({ resolveWithObject: true });

/** How many pixels differ (any channel by more than `tolerance`) inside a rectangle. */
function changed(
  a: { data: Buffer; info: sharp.OutputInfo },
  b: { data: Buffer },
  rect: { left: number; top: number; width: number; height: number },
  tolerance = 8,
) {
  let count = 0;
  const { width, channels } = a.info;
  for (let y = rect.top; y < rect.top + rect.height; y += 1)
    for (let x = rect.left; x < rect.left + rect.width; x += 1) {
      const i = (y * width + x) * channels;
      for (let c = 0; c < channels; c += 1)
        if (Math.abs(a.data[i + c]! - b.data[i + c]!) > tolerance) {
          count += 1;
          break;
        }
    }
  return count;
}

describe('image.watermark', () => {
  it('changes pixels where the text goes and nowhere else (PNG, compared with the original)', async () => {
    const original = await gray(400, 300).png().toBuffer();
    const marked = await watermarkImage(original, {
      text: '机密 Confidential',
      opacity: 1,
      position: 'center',
    });
    expect(marked.format).toBe('png');
    const before = await pixels(original);
    const after = await pixels(marked.data);
    // The middle band carries the text; the corners are untouched.
    expect(changed(before, after, { left: 120, top: 130, width: 160, height: 40 })).toBeGreaterThan(200);
    for (const corner of [
      { left: 0, top: 0 },
      { left: 360, top: 0 },
      { left: 0, top: 260 },
      { left: 360, top: 260 },
    ])
      expect(changed(before, after, { ...corner, width: 40, height: 40 }, 0)).toBe(0);
  });

  it('renders Chinese with its own glyphs, not the box a missing character gets', async () => {
    const raw = async (text: string) => (await renderText(text, 200, 100, { opacity: 1 })).data;
    const missing = await raw('\uE000'); // a private-use code point: no font has a glyph for it
    const ji = await raw('机');
    const mi = await raw('密');
    expect(ji.equals(missing)).toBe(false);
    expect(mi.equals(missing)).toBe(false);
    expect(ji.equals(mi)).toBe(false);
  });

  it('keeps JPEG and WebP as they are, and applies EXIF orientation first', async () => {
    const jpeg = await gray(200, 100).jpeg().withMetadata({ orientation: 6 }).toBuffer();
    const marked = await watermarkImage(jpeg, { text: 'Confidential' });
    const meta = await sharp(marked.data).metadata();
    expect(marked.format).toBe('jpeg');
    expect([meta.format, meta.width, meta.height]).toEqual(['jpeg', 100, 200]);
    const webp = await watermarkImage(await gray(120, 80).webp().toBuffer(), { text: 'Confidential' });
    expect((await sharp(webp.data).metadata()).format).toBe('webp');
  });

  it('checks the text: 1 to 100 characters, counted as a person counts them', () => {
    expect(checkWatermarkText('机'.repeat(100))).toBeNull();
    expect(checkWatermarkText('机'.repeat(101))).toMatch(/1 to 100/);
    expect(checkWatermarkText('   ')).toMatch(/1 to 100/);
    expect(checkWatermarkText('😀'.repeat(100))).toBeNull();
  });

  it('a ZIP: images watermarked in order, other files untouched, corrupt and oversized images copied and reported', async () => {
    const source = join(directory, 'photos.zip');
    const target = join(directory, 'photos-marked.zip');
    const big = await gray(300, 300).png().toBuffer();
    const notes = Buffer.from('not an image');
    const broken = Buffer.from('\xff\xd8\xff\xe0 this is not really a JPEG', 'latin1');
    await writeZip(source, {
      'a.jpg': await gray(200, 150).jpeg().toBuffer(),
      'docs/notes.txt': notes,
      'b.png': await gray(160, 120).png().toBuffer(),
      'broken.jpg': broken,
      'huge.png': big,
    });
    const progress: number[] = [];
    const outcomes = await watermarkArchive(
      source,
      target,
      { text: '机密', limits: { maxPixels: 50_000, maxSide: 65_535 } },
      {
        concurrency: 2,
        onProgress: (f) => progress.push(f),
      },
    );
    expect(outcomes.map((o) => [o.path, o.status])).toEqual([
      ['a.jpg', 'WATERMARKED'],
      ['docs/notes.txt', 'SKIPPED'],
      ['b.png', 'WATERMARKED'],
      ['broken.jpg', 'FAILED'],
      ['huge.png', 'FAILED'],
    ]);
    expect(outcomes[3]).toMatchObject({ reason: 'CORRUPT' });
    expect(outcomes[4]).toMatchObject({ reason: 'TOO_LARGE' });
    const out = await readZip(target);
    expect([...out.keys()]).toEqual(['a.jpg', 'docs/notes.txt', 'b.png', 'broken.jpg', 'huge.png']);
    expect(out.get('docs/notes.txt')).toEqual(notes);
    expect(out.get('broken.jpg')).toEqual(broken);
    expect(out.get('huge.png')).toEqual(big);
    expect((await sharp(out.get('a.jpg')!).metadata()).format).toBe('jpeg');
    expect(progress.at(-1)).toBe(1);
  });

  it('decompression bombs: small PNGs declaring 30000 × 30000, 100000 × 100000 or 9000000 × 1 pixels are refused per file, undecoded, with the reason; the other images are watermarked', async () => {
    const source = join(directory, 'bombs.zip');
    const target = join(directory, 'bombs-marked.zip');
    const photo = await gray(320, 240).jpeg().toBuffer();
    const bombs = {
      'bomb-30k.png': bombPng(30_000, 30_000),
      'bomb-100k.png': bombPng(100_000, 100_000),
      // Under the pixel limit, but the decoder's rows would be 9 million pixels wide.
      'bomb-wide.png': bombPng(9_000_000, 1),
    };
    await writeZip(source, {
      'photo.jpg': photo,
      ...bombs,
      'after.png': await gray(64, 64).png().toBuffer(),
    });
    // Under the worker's default limits (50 megapixels, 65535 pixels a side).
    const outcomes = await watermarkArchive(source, target, { text: '机密' });
    expect(outcomes).toEqual([
      { path: 'photo.jpg', status: 'WATERMARKED', format: 'jpeg' },
      {
        path: 'bomb-30k.png',
        status: 'FAILED',
        reason: 'TOO_LARGE',
        message: 'declares 30000 × 30000 pixels (900 megapixels); the limit is 50 megapixels',
      },
      {
        path: 'bomb-100k.png',
        status: 'FAILED',
        reason: 'TOO_LARGE',
        message: 'declares 100000 × 100000 pixels (10000 megapixels); the limit is 50 megapixels',
      },
      {
        path: 'bomb-wide.png',
        status: 'FAILED',
        reason: 'TOO_LARGE',
        message: 'declares 9000000 × 1 pixels; the limit is 65535 pixels a side',
      },
      { path: 'after.png', status: 'WATERMARKED', format: 'png' },
    ]);
    const out = await readZip(target);
    expect(out.get('bomb-30k.png')).toEqual(bombs['bomb-30k.png']);
    expect(out.get('bomb-100k.png')).toEqual(bombs['bomb-100k.png']);
    expect(out.get('bomb-wide.png')).toEqual(bombs['bomb-wide.png']);
    expect(out.get('photo.jpg')).not.toEqual(photo);
  });

  it('takes the format from the signature and the dimensions from the header alone', async () => {
    // The bomb's data is a few hundred bytes: a decoder would fail on it, the header reads fine.
    await expect(readImageHeader(bombPng(6_000, 4_000), defaultImageLimits)).resolves.toEqual({
      format: 'png',
      width: 6_000,
      height: 4_000,
      orientation: 1,
    });
    const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>');
    await expect(readImageHeader(svg, defaultImageLimits)).rejects.toMatchObject({
      reason: 'CORRUPT',
      message: 'not a JPEG, PNG or WebP',
    });
  });

  it('refuses a text out of bounds before touching the archive', async () => {
    const source = join(directory, 'one.zip');
    await writeZip(source, { 'a.png': await gray(10, 10).png().toBuffer() });
    await expect(watermarkArchive(source, join(directory, 'never.zip'), { text: '' })).rejects.toMatchObject({
      code: 'WATERMARK_TEXT_INVALID',
    });
  });

  it('refuses an archive whose entry inflates to more than it declares, and writes nothing', async () => {
    const source = join(directory, 'liar.zip');
    const target = join(directory, 'liar-out.zip');
    await writeRawZip(source, [
      { name: 'a.png', data: Buffer.alloc(50_000, 1), deflate: true, declaredSize: 1_000 },
    ]);
    await expect(watermarkArchive(source, target, { text: 'x' })).rejects.toMatchObject({
      code: 'ARCHIVE_INVALID',
    });
    expect(existsSync(target)).toBe(false);
  });

  it('a file that is not an image is streamed through; if its size lies, the archive is refused, nothing written', async () => {
    const source = join(directory, 'stream.zip');
    const target = join(directory, 'stream-out.zip');
    const large = randomBytes(3 * 2 ** 20);
    await writeRawZip(source, [
      { name: 'a.png', data: await gray(40, 30).png().toBuffer() },
      { name: 'data.bin', data: large, deflate: true },
      { name: 'b.png', data: await gray(40, 30).png().toBuffer() },
    ]);
    const outcomes = await watermarkArchive(source, target, { text: 'x' });
    expect(outcomes.map((o) => o.status)).toEqual(['WATERMARKED', 'SKIPPED', 'WATERMARKED']);
    // Buffer.equals: vitest's deep equality takes half a minute over 3 MB.
    expect((await readZip(target)).get('data.bin')?.equals(large)).toBe(true);
    const liar = join(directory, 'stream-liar.zip');
    const liarTarget = join(directory, 'stream-liar-out.zip');
    await writeRawZip(liar, [
      { name: 'a.png', data: await gray(40, 30).png().toBuffer() },
      { name: 'notes.txt', data: Buffer.alloc(50_000, 1), deflate: true, declaredSize: 1_000 },
    ]);
    await expect(watermarkArchive(liar, liarTarget, { text: 'x' })).rejects.toMatchObject({
      code: 'ARCHIVE_INVALID',
    });
    expect(existsSync(liarTarget)).toBe(false);
    expect(existsSync(`${liarTarget}.partial`)).toBe(false);
  });
});
