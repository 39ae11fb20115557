/**
 * `archive.clean`: a ZIP without the junk operating systems leave in archives (`__MACOSX/`, `._*`,
 * `.DS_Store`, `Thumbs.db`, `desktop.ini`, plus any extra globs) and without the folders that leaves
 * empty. Entries are streamed from the source to the target (yauzl → yazl); nothing is unpacked to disk.
 *
 * The whole central directory is checked before a byte is written, and an archive that is unsafe is
 * refused with a non-retryable code and no output: a path with `..` or an absolute path, a symlink, an
 * encrypted entry, too many entries, too many bytes in all, or an entry that inflates more than the
 * allowed ratio (a ZIP bomb). yauzl also checks that each entry inflates to exactly its declared size,
 * so a header that lies about it fails the copy.
 *
 * Names come out as the person who made the archive wrote them: names without the UTF-8 flag are read in
 * the archive's own legacy encoding (GBK, Shift-JIS, CP437…, detected: zipNames.ts) and every name is
 * written as UTF-8 with the flag set, which every current ZIP reader honours.
 */
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { pipeline } from 'node:stream/promises';
import { CapabilityError, defineCapability } from '@tdp/worker';
import { Type } from 'typebox';
import yazl from 'yazl';
import {
  type ArchiveLimits,
  damagedArchive,
  defaultArchiveLimits,
  openArchive,
  openEntry,
  type Scanned,
  scanArchive,
  zipToZip,
} from './zip.ts';
import { type NameEncoding, nameEncodings } from './zipNames.ts';

export interface CleanRules {
  /** What the names without the UTF-8 flag are in (default `auto`: detected, see zipNames.ts). */
  nameEncoding?: NameEncoding;
  /** Extra globs to remove (`*` within a folder name, `**` across folders, `?` one character). */
  extraPatterns?: string[];
  /** Keep the default junk list (true unless set to false). */
  defaultJunk?: boolean;
}

export interface RemovedEntry {
  path: string;
  /** Which rule removed it: a junk name, `pattern:<glob>`, or `empty-folder`. */
  reason: string;
}

export interface CleanReport {
  /** What the names without the UTF-8 flag were read in; every name is written as UTF-8, flagged. */
  nameEncoding: string | null;
  removed: RemovedEntry[];
  keptFiles: number;
  keptBytes: number;
}

/** The default junk: each rule tests one path segment (a file or folder name). */
const junkRules: [reason: string, test: (segment: string, isLast: boolean) => boolean][] = [
  ['__MACOSX', (s) => s === '__MACOSX'],
  ['AppleDouble', (s, last) => last && s.startsWith('._')],
  ['.DS_Store', (s, last) => last && s === '.DS_Store'],
  ['Thumbs.db', (s, last) => last && s.toLowerCase() === 'thumbs.db'],
  ['desktop.ini', (s, last) => last && s.toLowerCase() === 'desktop.ini'],
];

/** A glob as a regular expression over the whole path. */
export function globToRegExp(glob: string): RegExp {
  let source = '';
  for (let i = 0; i < glob.length; i += 1) {
    const c = glob[i]!;
    if (c === '*' && glob[i + 1] === '*') {
      // `**/` matches any number of folders, including none.
      if (glob[i + 2] === '/') {
        source += '(?:.*/)?';
        i += 2;
      } else {
        source += '.*';
        i += 1;
      }
    } else if (c === '*') source += '[^/]*';
    else if (c === '?') source += '[^/]';
    else source += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${source}$`);
}

/** Why `path` is junk under `rules`, or null to keep it. */
export function junkReason(
  path: string,
  rules: CleanRules = {},
  patterns = (rules.extraPatterns ?? []).map((p) => [p, globToRegExp(p)] as const),
): string | null {
  const trimmed = path.replace(/\/$/, '');
  if (rules.defaultJunk !== false) {
    const segments = trimmed.split('/');
    for (const [reason, test] of junkRules)
      if (segments.some((segment, index) => test(segment, index === segments.length - 1))) return reason;
  }
  for (const [glob, pattern] of patterns)
    if (pattern.test(trimmed) || pattern.test(path)) return `pattern:${glob}`;
  return null;
}

/**
 * Writes the cleaned archive to `targetPath` (atomically: a temporary file renamed at the end) and
 * returns what was removed. `onProgress` gets the fraction of entries done.
 */
export async function cleanArchive(
  sourcePath: string,
  targetPath: string,
  rules: CleanRules = {},
  options: { limits?: ArchiveLimits; onProgress?: (fraction: number) => void; signal?: AbortSignal } = {},
): Promise<CleanReport> {
  const limits = options.limits ?? defaultArchiveLimits;
  const patterns = (rules.extraPatterns ?? []).map((p) => [p, globToRegExp(p)] as const);
  const zip = await openArchive(sourcePath);
  try {
    const { entries, nameEncoding } = await scanArchive(zip, limits, rules.nameEncoding);
    const removed: RemovedEntry[] = [];
    const kept: Scanned[] = [];
    for (const scanned of entries) {
      const reason = junkReason(scanned.path, rules, patterns);
      if (reason) removed.push({ path: scanned.path, reason });
      else if (!scanned.isDirectory) kept.push(scanned);
    }
    // A folder stays only if a kept file is inside it (yazl creates the folders of its files' paths).
    const keptFolders = new Set<string>();
    for (const file of kept) {
      const parts = file.path.split('/');
      for (let i = 1; i < parts.length; i += 1) keptFolders.add(`${parts.slice(0, i).join('/')}/`);
    }
    for (const scanned of entries)
      if (scanned.isDirectory && !junkReason(scanned.path, rules, patterns) && !keptFolders.has(scanned.path))
        removed.push({ path: scanned.path, reason: 'empty-folder' });

    const temporary = `${targetPath}.partial`;
    const output = new yazl.ZipFile();
    const written = pipeline(output.outputStream, createWriteStream(temporary));
    let keptBytes = 0;
    try {
      for (const [index, file] of kept.entries()) {
        options.signal?.throwIfAborted();
        const stream = await openEntry(zip, file.entry);
        const mode = (file.entry.externalFileAttributes >>> 16) & 0o7777;
        // Deflate unless the source stored the entry as is (already compressed images, mostly).
        output.addReadStream(stream as never, file.path, {
          mtime: file.entry.getLastModDate(),
          ...(mode ? { mode: mode | 0o100000 } : {}),
          compress: file.entry.compressionMethod !== 0,
          size: file.entry.uncompressedSize,
        });
        // One entry at a time: the next is opened once this one has been read through.
        await new Promise<void>((resolve, reject) => {
          stream.once('end', () => resolve());
          stream.once('error', reject);
        });
        keptBytes += file.entry.uncompressedSize;
        options.onProgress?.((index + 1) / kept.length);
      }
      output.end();
      await written;
      await rename(temporary, targetPath);
    } catch (error) {
      (output.outputStream as unknown as { destroy(): void }).destroy();
      await written.catch(() => {});
      await rm(temporary, { force: true });
      if (error instanceof CapabilityError || (error as Error).name === 'AbortError') throw error;
      throw damagedArchive(error);
    }
    return { nameEncoding, removed, keptFiles: kept.length, keptBytes };
  } finally {
    zip.close();
  }
}

const RemovedEntrySchema = Type.Object({ path: Type.String(), reason: Type.String() });

/** The capability: the source ZIP comes from the application's storage, the cleaned one goes back there. */
export const archiveClean = defineCapability({
  name: 'archive.clean',
  version: '1',
  // CPU-bound: as many at once as the machine has CPUs, unless the worker is told otherwise.
  maxConcurrency: Math.max(1, availableParallelism()),
  input: Type.Object(
    {
      source: Type.String({ minLength: 1, description: "the source ZIP's resource reference" }),
      extraPatterns: Type.Optional(
        Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 100 }),
      ),
      defaultJunk: Type.Optional(Type.Boolean()),
      nameEncoding: Type.Optional(
        Type.Union(
          nameEncodings.map((e) => Type.Literal(e)),
          { description: 'what entry names without the UTF-8 flag are in; `auto` detects it' },
        ),
      ),
      outputPath: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
      maxOutputBytes: Type.Optional(Type.Integer({ minimum: 1 })),
    },
    { additionalProperties: false },
  ),
  output: Type.Object({
    archive: Type.String({ description: "the cleaned ZIP's resource reference" }),
    nameEncoding: Type.Union([Type.String(), Type.Null()], {
      description: 'what the names without the UTF-8 flag were read in (null: there were none)',
    }),
    removed: Type.Array(RemovedEntrySchema),
    keptFiles: Type.Integer(),
    keptBytes: Type.Integer(),
  }),
  async run(ctx, input) {
    const { archive, result: report } = await zipToZip(
      ctx,
      input,
      { outputPath: 'clean/archive.zip', phase: 'clean' },
      (source, target, onProgress) =>
        cleanArchive(
          source,
          target,
          {
            ...(input.extraPatterns ? { extraPatterns: input.extraPatterns } : {}),
            ...(input.defaultJunk !== undefined ? { defaultJunk: input.defaultJunk } : {}),
            ...(input.nameEncoding ? { nameEncoding: input.nameEncoding as NameEncoding } : {}),
          },
          { onProgress, signal: ctx.signal },
        ),
    );
    ctx.log.info('archive cleaned', {
      removed: report.removed.length,
      kept: report.keptFiles,
      nameEncoding: report.nameEncoding,
    });
    return { archive, ...report };
  },
});
