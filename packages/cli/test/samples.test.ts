/** The sample ZIPs of `tdp dev` are what they claim: real images among real junk, and a broken ZIP. */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { junkReason } from '../../capabilities/src/archiveClean.ts';
import { defaultArchiveLimits, openArchive, readEntry, scanArchive } from '../../capabilities/src/zip.ts';
import { writeSamples } from '../src/samples.ts';

const folders: string[] = [];
afterAll(async () => {
  for (const folder of folders) await rm(folder, { recursive: true, force: true });
});

describe('sample ZIPs', () => {
  it('holiday-photos.zip holds three decodable photos and junk that archive.clean removes', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'tdp-samples-'));
    folders.push(folder);
    const [photos] = await writeSamples(folder);
    const zip = await openArchive(photos!.path);
    const { entries } = await scanArchive(zip, defaultArchiveLimits);
    const files = entries.filter((e) => !e.isDirectory);
    const junk = files
      .filter((e) => junkReason(e.path))
      .map((e) => e.path)
      .sort();
    expect(junk).toEqual([
      '__MACOSX/photos/._beach.jpg',
      'photos/.DS_Store',
      'photos/Thumbs.db',
      'photos/desktop.ini',
    ]);
    const images = files.filter((e) => !junkReason(e.path));
    expect(images.map((e) => e.path).sort()).toEqual([
      'photos/beach.jpg',
      'photos/mountains.jpg',
      'photos/sunset.png',
    ]);
    for (const image of images) {
      const meta = await sharp(await readEntry(zip, image.entry)).metadata();
      expect(meta.format).toBe(image.path.endsWith('.png') ? 'png' : 'jpeg');
      expect(meta.width).toBeGreaterThanOrEqual(1024);
    }
    zip.close();
  });

  it('broken.zip cannot be opened, and a second call keeps the files it wrote', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'tdp-samples-'));
    folders.push(folder);
    const [, broken] = await writeSamples(folder);
    await expect(openArchive(broken!.path)).rejects.toThrow();
    const before = (await stat(broken!.path)).mtimeMs;
    await writeSamples(folder);
    expect((await stat(broken!.path)).mtimeMs).toBe(before);
  });
});
