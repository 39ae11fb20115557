/**
 * Entry names of ZIPs from the real world. A name with the UTF-8 flag (general purpose bit 11) or an
 * Info-ZIP Unicode Path extra field says how to read it. The others are bytes in whatever code page the
 * archiving tool ran in: the spec says CP437, but Windows' own "compressed folder" and many tools write
 * the OEM code page of the user's locale (GBK on Chinese Windows, Shift-JIS on Japanese Windows), and
 * tools on Linux and macOS often write UTF-8 without the flag. Read as CP437, such names come out garbled
 * — and a Shift-JIS or GBK character whose second byte is 0x5C even becomes a backslash, which ZIP readers
 * take for a folder separator.
 *
 * One archive comes from one tool in one locale, so its unflagged names are read in one encoding, chosen
 * from all of them together: UTF-8 when every one is valid UTF-8, else what jschardet (a port of Python's
 * chardet) finds among the legacy code pages below, provided it decodes every name cleanly; else CP437.
 */
import { crc32 } from 'node:zlib';
import iconv from 'iconv-lite';
import yauzl from 'yauzl';

/** How the capability's caller may say what the unflagged names are in, when it knows better. */
export const nameEncodings = ['auto', 'utf-8', 'gbk', 'shift_jis', 'big5', 'cp949', 'cp437'] as const;
export type NameEncoding = (typeof nameEncodings)[number];

/**
 * The code pages detection chooses from, as chardet names them: Chinese Windows (GB18030, a superset
 * of GBK/CP936), Japanese Windows (CP932, Microsoft's Shift-JIS), Traditional Chinese (Big5), Korean
 * (CP949), and CP437, the spec's own. More candidates make short names more often mistaken.
 */
const detectedEncodings = ['gb18030', 'cp932', 'big5', 'cp949', 'cp437'];
const fallbackEncoding = 'cp437';

/** iconv-lite's name for each encoding the caller can name. */
const decoderNames: Record<Exclude<NameEncoding, 'auto'>, string> = {
  'utf-8': 'utf-8',
  gbk: 'gb18030',
  shift_jis: 'cp932',
  big5: 'big5',
  cp949: 'cp949',
  cp437: 'cp437',
};

export interface RawName {
  raw: Buffer;
  generalPurposeBitFlag: number;
  extraFields: { id: number; data: Buffer }[];
}

/** The names in order, and the encoding the unflagged non-ASCII ones were read in (null: there were none). */
export interface DecodedNames {
  names: string[];
  encoding: string | null;
}

// Not in @types/yauzl: yauzl's own decoding (UTF-8 flag, else the Info-ZIP Unicode Path extra field,
// else CP437), used for the names that say how to read them.
const yauzlName = (
  yauzl as unknown as {
    getFileNameLowLevel(flags: number, raw: Buffer, extraFields: unknown[], strict: boolean): string;
  }
).getFileNameLowLevel;

/** True when the name says its own encoding: the UTF-8 flag, or a Unicode Path field whose CRC matches. */
function selfDescribing(name: RawName): boolean {
  if ((name.generalPurposeBitFlag & 0x800) !== 0) return true;
  return name.extraFields.some(
    (field) =>
      field.id === 0x7075 &&
      field.data.length >= 6 &&
      field.data[0] === 1 &&
      field.data.readUInt32LE(1) === crc32(name.raw),
  );
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
function isUtf8(bytes: Buffer): boolean {
  try {
    strictUtf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/** Whether `encoding` reads every name as characters it can write back to the same bytes. */
function decodesCleanly(raws: Buffer[], encoding: string): boolean {
  return raws.every((raw) => {
    const text = iconv.decode(raw, encoding);
    return !text.includes('\uFFFD') && iconv.encode(text, encoding).equals(raw);
  });
}

/**
 * What the detector reads: each distinct run of bytes ≥ 0x40 that holds a non-ASCII byte, one a line.
 * No legacy double-byte encoding uses a byte below 0x40 as the second byte of a character, so the cuts
 * never split one; repeated words ("照片 (1).jpg", "照片 (2).jpg", one folder in every path) count once,
 * as repetition would otherwise weigh like evidence.
 */
export function detectionSample(raws: Buffer[]): Buffer {
  const seen = new Set<string>();
  const parts: Buffer[] = [];
  for (const raw of raws) {
    let start = 0;
    for (let i = 0; i <= raw.length; i += 1) {
      if (i < raw.length && raw[i]! >= 0x40) continue;
      const word = raw.subarray(start, i);
      start = i + 1;
      const key = word.toString('latin1');
      if (!word.some((byte) => byte >= 0x80) || seen.has(key)) continue;
      seen.add(key);
      parts.push(word, Buffer.from('\n'));
    }
  }
  return Buffer.concat(parts);
}

/** The encoding of an archive's unflagged non-ASCII names (see the top of this file). */
export async function detectNameEncoding(raws: Buffer[]): Promise<string> {
  if (raws.every(isUtf8)) return 'utf-8';
  // Loaded on first use: its model costs ~150 ms and ~50 MB, which ASCII and UTF-8 archives never need.
  const { chardet } = await import('jschardet');
  const guess = chardet
    .detect(detectionSample(raws), {
      includeEncodings: detectedEncodings,
      noMatchEncoding: fallbackEncoding,
    })
    .encoding?.toLowerCase();
  return guess && iconv.encodingExists(guess) && decodesCleanly(raws, guess) ? guess : fallbackEncoding;
}

/**
 * Every entry's name, in order, as text with `/` between folders (a backslash is taken for one, as
 * Windows tools write it, once the name is decoded).
 */
export async function decodeEntryNames(
  entries: RawName[],
  choice: NameEncoding = 'auto',
): Promise<DecodedNames> {
  const legacy = new Set(
    entries.filter((entry) => !selfDescribing(entry) && entry.raw.some((byte) => byte >= 0x80)),
  );
  const encoding =
    legacy.size === 0
      ? null
      : choice === 'auto'
        ? await detectNameEncoding([...legacy].map((entry) => entry.raw))
        : decoderNames[choice];
  const names = entries.map((entry) =>
    encoding && legacy.has(entry)
      ? iconv.decode(entry.raw, encoding).replace(/\\/g, '/')
      : yauzlName(entry.generalPurposeBitFlag, entry.raw, entry.extraFields, false),
  );
  return { names, encoding };
}
