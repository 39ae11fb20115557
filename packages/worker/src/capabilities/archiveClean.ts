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
 */
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { Type } from 'typebox';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { CapabilityError, defineCapability } from '../sdk.ts';

export interface CleanRules {
  /** Extra globs to remove (`*` within a folder name, `**` across folders, `?` one character). */
  extraPatterns?: string[];
  /** Keep the default junk list (true unless set to false). */
  defaultJunk?: boolean;
}

export interface CleanLimits {
  maxEntries: number;
  maxTotalBytes: number;
  /** Uncompressed ÷ compressed size above which an entry (of at least 1 MiB) is taken for a bomb. */
  maxCompressionRatio: number;
}

export const defaultCleanLimits: CleanLimits = {
  maxEntries: 10_000,
  maxTotalBytes: 4 * 2 ** 30,
  maxCompressionRatio: 200,
};

export interface RemovedEntry {
  path: string;
  /** Which rule removed it: a junk name, `pattern:<glob>`, or `empty-folder`. */
  reason: string;
}

export interface CleanReport {
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

interface Scanned {
  path: string;
  isDirectory: boolean;
  entry: yauzl.Entry;
}

// Not in @types/yauzl: the name decoding yauzl applies with decodeStrings (UTF-8 flag, Info-ZIP Unicode
// Path extra field, else CP437), used here so that unsafe names are reported by us, with their path.
const getFileName = (
  yauzl as unknown as {
    getFileNameLowLevel(flags: number, raw: Buffer, extraFields: unknown[], strict: boolean): string;
  }
).getFileNameLowLevel;

function open(path: string): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => {
    yauzl.open(
      path,
      { lazyEntries: true, decodeStrings: false, validateEntrySizes: true, autoClose: false },
      (error, zip) =>
        error ? reject(refusal('ARCHIVE_INVALID', `not a readable ZIP: ${error.message}`)) : resolve(zip!),
    );
  });
}

function refusal(code: string, message: string): CapabilityError {
  return new CapabilityError(code, message, { retryable: false, category: 'INPUT' });
}

/** Reads and checks the central directory. Throws a refusal for an unsafe archive. */
async function scan(zip: yauzl.ZipFile, limits: CleanLimits): Promise<Scanned[]> {
  if (zip.entryCount > limits.maxEntries)
    throw refusal(
      'ARCHIVE_TOO_MANY_ENTRIES',
      `${zip.entryCount} entries (the limit is ${limits.maxEntries})`,
    );
  const entries: Scanned[] = [];
  let total = 0;
  await new Promise<void>((resolve, reject) => {
    zip.on('error', (error: Error) =>
      reject(
        /encrypt/i.test(error.message)
          ? refusal('ARCHIVE_ENCRYPTED', `an entry is encrypted: ${error.message}`)
          : refusal('ARCHIVE_INVALID', `the ZIP is damaged: ${error.message}`),
      ),
    );
    zip.on('end', () => resolve());
    zip.on('entry', (entry: yauzl.Entry) => {
      try {
        const raw = entry.fileName as unknown as Buffer;
        const path = getFileName(entry.generalPurposeBitFlag, raw, entry.extraFields, false);
        if (/^[a-zA-Z]:/.test(path) || path.startsWith('/'))
          throw refusal('ARCHIVE_UNSAFE_PATH', `an entry has an absolute path: ${path}`);
        if (path.split('/').includes('..'))
          throw refusal('ARCHIVE_UNSAFE_PATH', `an entry leaves the archive's folder: ${path}`);
        if ((entry.generalPurposeBitFlag & 0x1) !== 0)
          throw refusal('ARCHIVE_ENCRYPTED', `an entry is encrypted: ${path}`);
        const unixType = (entry.externalFileAttributes >>> 16) & 0o170000;
        if (unixType === 0o120000) throw refusal('ARCHIVE_SYMLINK', `an entry is a symbolic link: ${path}`);
        total += entry.uncompressedSize;
        if (total > limits.maxTotalBytes)
          throw refusal('ARCHIVE_TOO_LARGE', `more than ${limits.maxTotalBytes} bytes uncompressed`);
        if (
          entry.uncompressedSize >= 2 ** 20 &&
          entry.uncompressedSize / Math.max(1, entry.compressedSize) > limits.maxCompressionRatio
        )
          throw refusal(
            'ARCHIVE_COMPRESSION_RATIO',
            `${path} inflates ${Math.round(entry.uncompressedSize / Math.max(1, entry.compressedSize))}× (the limit is ${limits.maxCompressionRatio}×)`,
          );
        entries.push({ path, isDirectory: path.endsWith('/'), entry });
        zip.readEntry();
      } catch (error) {
        reject(error);
      }
    });
    zip.readEntry();
  });
  return entries;
}

function openEntry(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<NodeJS.ReadableStream> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (error, stream) => (error ? reject(error) : resolve(stream!)));
  });
}

/**
 * Writes the cleaned archive to `targetPath` (atomically: a temporary file renamed at the end) and
 * returns what was removed. `onProgress` gets the fraction of entries done.
 */
export async function cleanArchive(
  sourcePath: string,
  targetPath: string,
  rules: CleanRules = {},
  options: { limits?: CleanLimits; onProgress?: (fraction: number) => void; signal?: AbortSignal } = {},
): Promise<CleanReport> {
  const limits = options.limits ?? defaultCleanLimits;
  const patterns = (rules.extraPatterns ?? []).map((p) => [p, globToRegExp(p)] as const);
  const zip = await open(sourcePath);
  try {
    const entries = await scan(zip, limits);
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
      const message = (error as Error).message;
      if (error instanceof CapabilityError || (error as Error).name === 'AbortError') throw error;
      throw refusal('ARCHIVE_INVALID', `the ZIP is damaged: ${message}`);
    }
    return { removed, keptFiles: kept.length, keptBytes };
  } finally {
    zip.close();
  }
}

const RemovedEntrySchema = Type.Object({ path: Type.String(), reason: Type.String() });

/** The capability: the source ZIP comes from the application's storage, the cleaned one goes back there. */
export const archiveClean = defineCapability({
  name: 'archive.clean',
  version: '1',
  input: Type.Object(
    {
      source: Type.String({ minLength: 1, description: "the source ZIP's resource reference" }),
      extraPatterns: Type.Optional(
        Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 100 }),
      ),
      defaultJunk: Type.Optional(Type.Boolean()),
      outputPath: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
      maxOutputBytes: Type.Optional(Type.Integer({ minimum: 1 })),
    },
    { additionalProperties: false },
  ),
  output: Type.Object({
    archive: Type.String({ description: "the cleaned ZIP's resource reference" }),
    removed: Type.Array(RemovedEntrySchema),
    keptFiles: Type.Integer(),
    keptBytes: Type.Integer(),
  }),
  async run(ctx, input) {
    ctx.progress(0, { phase: 'download' });
    const source = await ctx.download(input.source);
    const output = await ctx.allocateOutput({
      relativePath: input.outputPath ?? 'clean/archive.zip',
      mediaType: 'application/zip',
      maxBytes: input.maxOutputBytes ?? defaultCleanLimits.maxTotalBytes,
      artifactType: 'ZIP',
    });
    ctx.progress(5, { phase: 'clean' });
    const report = await cleanArchive(
      source,
      output.path,
      {
        ...(input.extraPatterns ? { extraPatterns: input.extraPatterns } : {}),
        ...(input.defaultJunk !== undefined ? { defaultJunk: input.defaultJunk } : {}),
      },
      { onProgress: (fraction) => ctx.progress(5 + fraction * 85), signal: ctx.signal },
    );
    ctx.progress(90, { phase: 'upload' });
    const uploaded = await output.upload();
    ctx.log.info('archive cleaned', { removed: report.removed.length, kept: report.keptFiles });
    return { archive: uploaded.resourceRef, ...report };
  },
});
