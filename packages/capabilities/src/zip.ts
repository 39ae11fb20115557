/**
 * Reading ZIPs safely, for every capability that takes one: the whole central directory is checked before
 * a byte is written, and an unsafe archive is refused with a non-retryable code (see archive.clean).
 */
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import { crc32, inflateRaw } from 'node:zlib';
import { type CapabilityContext, CapabilityError } from '@tdp/worker';
import yauzl from 'yauzl';
import { decodeEntryNames, type NameEncoding } from './zipNames.ts';

// yazl computes each entry's CRC-32 in JavaScript (buffer-crc32): about 3 ms per megabyte on the main
// thread, taken from sharp's threads on a small machine. zlib's native CRC-32 gives the same value in a
// twentieth of the time, so yazl's copy of buffer-crc32 is pointed at it.
const bufferCrc32 = createRequire(createRequire(import.meta.url).resolve('yazl'))('buffer-crc32') as {
  unsigned(buffer: Buffer, previous?: number): number;
};
bufferCrc32.unsigned = (buffer, previous) => crc32(buffer, previous ?? 0);

export interface ArchiveLimits {
  maxEntries: number;
  maxTotalBytes: number;
  /** Uncompressed ÷ compressed size above which an entry (of at least 1 MiB) is taken for a bomb. */
  maxCompressionRatio: number;
}

export const defaultArchiveLimits: ArchiveLimits = {
  maxEntries: 10_000,
  maxTotalBytes: 4 * 2 ** 30,
  maxCompressionRatio: 200,
};

export interface Scanned {
  path: string;
  isDirectory: boolean;
  entry: yauzl.Entry;
}

export interface ScannedArchive {
  entries: Scanned[];
  /** What the names without the UTF-8 flag were read in (null: every name said its own, or was ASCII). */
  nameEncoding: string | null;
}

export function openArchive(path: string): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => {
    yauzl.open(
      path,
      { lazyEntries: true, decodeStrings: false, validateEntrySizes: true, autoClose: false },
      (error, zip) =>
        error
          ? reject(
              refusal(
                'ARCHIVE_INVALID',
                'This file is not a readable ZIP archive. Check that it is a ZIP, then upload it again.',
                `not a readable ZIP: ${error.message}`,
              ),
            )
          : resolve(zip!),
    );
  });
}

/** The archive itself is the problem: `message` for the person, `detail` (the library's words) for developers. */
export function refusal(code: string, message: string, detail?: string): CapabilityError {
  return new CapabilityError(code, message, {
    retryable: false,
    category: 'INPUT',
    ...(detail ? { detail } : {}),
  });
}

/** A ZIP the reader gave up on part-way: what the person can do about it, and what the reader said. */
export const damagedArchive = (error: unknown) =>
  refusal(
    'ARCHIVE_INVALID',
    'The ZIP is damaged (it may have been cut short). Upload it again.',
    `the ZIP is damaged: ${(error as Error).message}`,
  );

/** Every entry of the central directory, names still raw (`decodeStrings: false`). */
async function readCentralDirectory(zip: yauzl.ZipFile): Promise<yauzl.Entry[]> {
  const entries: yauzl.Entry[] = [];
  await new Promise<void>((resolve, reject) => {
    zip.on('error', (error: Error) =>
      reject(
        /encrypt/i.test(error.message)
          ? refusal(
              'ARCHIVE_ENCRYPTED',
              'The ZIP has password-protected files. Upload it again without a password.',
              `an entry is encrypted: ${error.message}`,
            )
          : damagedArchive(error),
      ),
    );
    zip.on('end', () => resolve());
    zip.on('entry', (entry: yauzl.Entry) => {
      entries.push(entry);
      zip.readEntry();
    });
    zip.readEntry();
  });
  return entries;
}

/**
 * Reads and checks the central directory, with the names decoded (zipNames.ts) before any check, so
 * that an unsafe name is judged and reported as the person who made the archive wrote it. Throws a
 * refusal for an unsafe archive.
 */
export async function scanArchive(
  zip: yauzl.ZipFile,
  limits: ArchiveLimits,
  nameEncoding: NameEncoding = 'auto',
): Promise<ScannedArchive> {
  if (zip.entryCount > limits.maxEntries)
    throw refusal(
      'ARCHIVE_TOO_MANY_ENTRIES',
      `${zip.entryCount} entries (the limit is ${limits.maxEntries})`,
    );
  const raw = await readCentralDirectory(zip);
  const decoded = await decodeEntryNames(
    raw.map((entry) => ({
      raw: entry.fileName as unknown as Buffer,
      generalPurposeBitFlag: entry.generalPurposeBitFlag,
      extraFields: entry.extraFields,
    })),
    nameEncoding,
  );
  const entries: Scanned[] = [];
  let total = 0;
  for (const [index, entry] of raw.entries()) {
    const path = decoded.names[index]!;
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
  }
  return { entries, nameEncoding: decoded.encoding };
}

export function openEntry(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<NodeJS.ReadableStream> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (error, stream) => (error ? reject(error) : resolve(stream!)));
  });
}

const inflate = promisify(inflateRaw);

/**
 * An entry's bytes in memory, read in one call (a stream reads 16 KiB at a time through the thread pool
 * that sharp also works in) and inflated natively. Its size must be the one declared.
 */
export async function readEntry(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<Buffer> {
  const header = (await (
    zip as unknown as { readLocalFileHeaderPromise(e: yauzl.Entry): Promise<{ fileDataStart: number }> }
  ).readLocalFileHeaderPromise(entry)) as { fileDataStart: number };
  const reader = (
    zip as unknown as {
      reader: {
        read(b: Buffer, o: number, l: number, p: number, cb: (e: Error | null, n: number) => void): void;
      };
    }
  ).reader;
  const raw = Buffer.allocUnsafe(entry.compressedSize);
  const bytes = await new Promise<number>((resolve, reject) =>
    reader.read(raw, 0, raw.length, header.fileDataStart, (error, n) => (error ? reject(error) : resolve(n))),
  );
  if (bytes !== raw.length)
    throw new Error(`${entry.compressedSize - bytes} bytes missing at the end of the file`);
  const data =
    entry.compressionMethod === 0
      ? raw
      : entry.compressionMethod === 8
        ? await inflate(raw, { maxOutputLength: entry.uncompressedSize + 1 })
        : null;
  if (!data) throw new Error(`compression method ${entry.compressionMethod} is not supported`);
  if (data.length !== entry.uncompressedSize)
    throw new Error(
      `an entry inflates to ${data.length} bytes, not the ${entry.uncompressedSize} it declares`,
    );
  return data;
}

/**
 * The shape of a ZIP-to-ZIP capability: download the source, allocate the output, run `work` from one
 * local file to the other with progress from 5 to 90 %, upload. Returns the new archive's reference.
 */
export async function zipToZip<T>(
  ctx: CapabilityContext,
  input: { source: string; outputPath?: string; maxOutputBytes?: number },
  defaults: { outputPath: string; phase: string },
  work: (sourcePath: string, targetPath: string, onProgress: (fraction: number) => void) => Promise<T>,
): Promise<{ archive: string; result: T }> {
  ctx.progress(0, { phase: 'download' });
  const source = await ctx.download(input.source);
  const output = await ctx.allocateOutput({
    relativePath: input.outputPath ?? defaults.outputPath,
    mediaType: 'application/zip',
    maxBytes: input.maxOutputBytes ?? defaultArchiveLimits.maxTotalBytes,
    artifactType: 'ZIP',
  });
  ctx.progress(5, { phase: defaults.phase });
  const result = await work(source, output.path, (fraction) => ctx.progress(5 + fraction * 85));
  ctx.progress(90, { phase: 'upload' });
  const uploaded = await output.upload();
  return { archive: uploaded.resourceRef, result };
}
