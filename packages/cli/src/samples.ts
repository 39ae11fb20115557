/**
 * Sample ZIPs for the first five minutes with `tdp dev`: real JPEG and PNG photos mixed with the junk
 * operating systems leave in archives (so `archive.clean` has something to remove and
 * `image.watermark` something to mark), and a broken ZIP that ends in a readable failure.
 */
import { createWriteStream } from 'node:fs';
import { access, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import sharp from 'sharp';
import yazl from 'yazl';

export interface Sample {
  name: string;
  path: string;
  description: string;
}

/** A photo-like picture: a colour gradient with a few shapes, `width`×`height`. */
async function picture(width: number, height: number, hue: number, format: 'jpeg' | 'png'): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">
    <defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">
      <stop offset="0" stop-color="hsl(${hue},70%,55%)"/><stop offset="1" stop-color="hsl(${(hue + 60) % 360},70%,30%)"/>
    </linearGradient></defs>
    <rect width="100%" height="100%" fill="url(#g)"/>
    <circle cx="${width * 0.3}" cy="${height * 0.4}" r="${height * 0.18}" fill="hsl(${(hue + 180) % 360},80%,70%)"/>
    <rect x="${width * 0.55}" y="${height * 0.55}" width="${width * 0.3}" height="${height * 0.25}" rx="24" fill="rgba(255,255,255,0.35)"/>
  </svg>`;
  const image = sharp(Buffer.from(svg));
  return format === 'jpeg' ? image.jpeg({ quality: 85 }).toBuffer() : image.png().toBuffer();
}

async function zipOf(path: string, files: [name: string, content: Buffer | string][]): Promise<void> {
  const zip = new yazl.ZipFile();
  for (const [name, content] of files) {
    if (name.endsWith('/')) zip.addEmptyDirectory(name);
    else zip.addBuffer(Buffer.isBuffer(content) ? content : Buffer.from(content), name);
  }
  zip.end();
  await pipeline(zip.outputStream, createWriteStream(path));
}

/** Writes the samples into `folder` (once; existing files are kept) and lists them. */
export async function writeSamples(folder: string): Promise<Sample[]> {
  await mkdir(folder, { recursive: true });
  const samples: Sample[] = [
    {
      name: 'holiday-photos.zip',
      path: join(folder, 'holiday-photos.zip'),
      description: '3 photos (JPEG and PNG) with .DS_Store, __MACOSX/, Thumbs.db and desktop.ini junk',
    },
    {
      name: 'broken.zip',
      path: join(folder, 'broken.zip'),
      description: 'a ZIP cut short: the task fails with a readable reason',
    },
  ];
  const exists = async (path: string) =>
    access(path).then(
      () => true,
      () => false,
    );
  if (!(await exists(samples[0]!.path))) {
    await zipOf(samples[0]!.path, [
      ['photos/', ''],
      ['photos/beach.jpg', await picture(1600, 1067, 200, 'jpeg')],
      ['photos/mountains.jpg', await picture(1280, 853, 120, 'jpeg')],
      ['photos/sunset.png', await picture(1024, 683, 20, 'png')],
      ['photos/.DS_Store', Buffer.alloc(6148, 0)],
      ['photos/Thumbs.db', Buffer.from('thumbnail cache')],
      ['photos/desktop.ini', '[.ShellClassInfo]\r\nIconResource=C:\\Windows\\System32\\imageres.dll,-3\r\n'],
      ['__MACOSX/', ''],
      ['__MACOSX/photos/._beach.jpg', Buffer.alloc(4096, 7)],
    ]);
  }
  if (!(await exists(samples[1]!.path))) {
    // The first bytes of a real ZIP, then nothing: no central directory.
    const whole = join(folder, '.broken-whole.zip');
    await zipOf(whole, [['photos/beach.jpg', await picture(640, 427, 200, 'jpeg')]]);
    const bytes = await readFile(whole);
    await writeFile(samples[1]!.path, bytes.subarray(0, Math.floor(bytes.length / 2)));
    await rm(whole);
  }
  return samples;
}
