/**
 * Real ZIP files for tests: well-formed ones through yazl, and hand-assembled ones for what yazl refuses
 * to write (`..` paths, symlinks, encrypted flags, names in legacy encodings, sizes that lie).
 */
import { execFileSync } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { crc32, deflateRawSync } from 'node:zlib';
import yauzl from 'yauzl';
import yazl from 'yazl';

/** A ZIP of `files` (a name ending in `/` is a folder). */
export async function writeZip(path: string, files: Record<string, string | Buffer>): Promise<void> {
  const zip = new yazl.ZipFile();
  for (const [name, content] of Object.entries(files)) {
    if (name.endsWith('/')) zip.addEmptyDirectory(name);
    else zip.addBuffer(Buffer.isBuffer(content) ? content : Buffer.from(content), name);
  }
  zip.end();
  await pipeline(zip.outputStream, createWriteStream(path));
}

export interface RawEntry {
  name: Buffer | string;
  data: Buffer;
  /** General purpose flags (bit 0: encrypted, bit 11: UTF-8 name). */
  flags?: number;
  /** Unix mode in the external attributes (e.g. 0o120777 for a symlink). */
  unixMode?: number;
  deflate?: boolean;
  /** Overrides the uncompressed size written in the headers. */
  declaredSize?: number;
  /** Extra fields, in both headers, as written. */
  extra?: Buffer;
}

/** Assembles a ZIP byte by byte, exactly as told. */
export async function writeRawZip(path: string, entries: RawEntry[]): Promise<void> {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.isBuffer(e.name) ? e.name : Buffer.from(e.name, 'utf8');
    const extra = e.extra ?? Buffer.alloc(0);
    const compressed = e.deflate ? deflateRawSync(e.data) : e.data;
    // Traditional encryption puts a 12-byte header before the data.
    const body = (e.flags ?? 0) & 0x1 ? Buffer.concat([Buffer.alloc(12, 0xaa), compressed]) : compressed;
    const size = e.declaredSize ?? e.data.length;
    const crc = crc32(e.data);
    const method = e.deflate ? 8 : 0;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(e.flags ?? 0, 6);
    local.writeUInt16LE(method, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(extra.length, 28);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE((3 << 8) | 20, 4); // made by Unix
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(e.flags ?? 0, 8);
    central.writeUInt16LE(method, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(body.length, 20);
    central.writeUInt32LE(size, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt16LE(extra.length, 30);
    central.writeUInt32LE(((e.unixMode ?? 0o100644) << 16) >>> 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, extra, body);
    centrals.push(central, name, extra);
    offset += local.length + name.length + extra.length + body.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  await writeFile(path, Buffer.concat([...locals, directory, end]));
}

/** Every entry of a ZIP: its name and, for files, its content. */
export async function readZip(path: string): Promise<Map<string, Buffer | null>> {
  const zip = await yauzl.openPromise(path, { autoClose: false });
  const contents = new Map<string, Buffer | null>();
  // `eachEntry` (yauzl 3) is not in @types/yauzl yet.
  const entries = (zip as unknown as { eachEntry(): AsyncIterable<yauzl.Entry> }).eachEntry();
  try {
    for await (const entry of entries) {
      if (entry.fileName.endsWith('/')) {
        contents.set(entry.fileName, null);
        continue;
      }
      const stream = await zip.openReadStreamPromise(entry);
      const chunks: Buffer[] = [];
      for await (const chunk of stream) chunks.push(chunk as Buffer);
      contents.set(entry.fileName, Buffer.concat(chunks));
    }
  } finally {
    zip.close();
  }
  return contents;
}

/** An Info-ZIP Unicode Path extra field (0x7075): the UTF-8 name for the raw one it carries the CRC of. */
export function unicodePathField(raw: Buffer, name: string): Buffer {
  const utf8 = Buffer.from(name, 'utf8');
  const field = Buffer.alloc(4 + 5 + utf8.length);
  field.writeUInt16LE(0x7075, 0);
  field.writeUInt16LE(5 + utf8.length, 2);
  field.writeUInt8(1, 4);
  field.writeUInt32LE(crc32(raw), 5);
  utf8.copy(field, 9);
  return field;
}

/**
 * The names as Python's zipfile reads them (it honours the UTF-8 flag; `metadataEncoding` is how it is
 * told the encoding of unflagged names), one independent reader besides yauzl.
 */
export function pythonZipNames(path: string, metadataEncoding?: string): string[] {
  const script =
    'import json, sys, zipfile\n' +
    'z = zipfile.ZipFile(sys.argv[1], metadata_encoding=sys.argv[2] or None)\n' +
    'print(json.dumps(z.namelist()))';
  return JSON.parse(
    execFileSync('python3', ['-c', script, path, metadataEncoding ?? ''], { encoding: 'utf8' }),
  ) as string[];
}

/** The names as Info-ZIP's `zipinfo -1` lists them. */
export function zipinfoNames(path: string): string[] {
  return execFileSync('zipinfo', ['-1', path], { encoding: 'utf8' }).split('\n').filter(Boolean);
}
