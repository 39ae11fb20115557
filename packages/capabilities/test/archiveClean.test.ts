import { existsSync, mkdtempSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import iconv from 'iconv-lite';
import { describe, expect, it } from 'vitest';
import { cleanArchive, globToRegExp, junkReason } from '../src/archiveClean.ts';
import { pythonZipNames, readZip, unicodePathField, writeRawZip, writeZip, zipinfoNames } from './zips.ts';

const directory = mkdtempSync(join(tmpdir(), 'tdp-clean-'));
let counter = 0;
const paths = () => {
  counter += 1;
  return { source: join(directory, `in-${counter}.zip`), target: join(directory, `out-${counter}.zip`) };
};

describe('junk rules', () => {
  it.each([
    ['__MACOSX/photos/._a.jpg', '__MACOSX'],
    ['photos/._a.jpg', 'AppleDouble'],
    ['photos/.DS_Store', '.DS_Store'],
    ['THUMBS.DB', 'Thumbs.db'],
    ['docs/Desktop.ini', 'desktop.ini'],
    ['photos/a.jpg', null],
    ['photos/._/b.jpg', null],
    ['notes/thumbs.db.txt', null],
  ])('%s → %s', (path, reason) => {
    expect(junkReason(path)).toBe(reason);
  });

  it('extra globs: * stays within a folder, ** crosses folders, ? is one character', () => {
    expect(globToRegExp('*.tmp').test('a.tmp')).toBe(true);
    expect(globToRegExp('*.tmp').test('dir/a.tmp')).toBe(false);
    expect(globToRegExp('**/*.tmp').test('dir/sub/a.tmp')).toBe(true);
    expect(globToRegExp('**/*.tmp').test('a.tmp')).toBe(true);
    expect(globToRegExp('log?.txt').test('log1.txt')).toBe(true);
    expect(globToRegExp('log?.txt').test('log12.txt')).toBe(false);
    expect(junkReason('build/cache/x.o', { extraPatterns: ['build/**'] })).toBe('pattern:build/**');
    expect(junkReason('.DS_Store', { defaultJunk: false })).toBeNull();
  });
});

describe('cleanArchive', () => {
  it('removes the junk and the folders it leaves empty, keeps everything else byte for byte, reports what it removed', async () => {
    const { source, target } = paths();
    const photo = Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 251));
    await writeZip(source, {
      'album/': '',
      'album/photo.jpg': photo,
      'album/.DS_Store': 'junk',
      'album/._photo.jpg': 'apple double',
      '__MACOSX/': '',
      '__MACOSX/album/._photo.jpg': 'resource fork',
      'only-junk/': '',
      'only-junk/Thumbs.db': 'junk',
      'empty/': '',
      'docs/readme.txt': 'hello',
      'docs/desktop.ini': '[junk]',
      'docs/tmp/cache.tmp': 'extra',
    });
    const progress: number[] = [];
    const report = await cleanArchive(
      source,
      target,
      { extraPatterns: ['**/*.tmp'] },
      {
        onProgress: (f) => progress.push(f),
      },
    );
    const out = await readZip(target);
    expect([...out.keys()].sort()).toEqual(['album/photo.jpg', 'docs/readme.txt']);
    expect(out.get('album/photo.jpg')).toEqual(photo);
    expect(out.get('docs/readme.txt')?.toString()).toBe('hello');
    expect(report.keptFiles).toBe(2);
    expect(report.keptBytes).toBe(photo.length + 5);
    expect(report.removed).toEqual(
      expect.arrayContaining([
        { path: 'album/.DS_Store', reason: '.DS_Store' },
        { path: 'album/._photo.jpg', reason: 'AppleDouble' },
        { path: '__MACOSX/', reason: '__MACOSX' },
        { path: '__MACOSX/album/._photo.jpg', reason: '__MACOSX' },
        { path: 'only-junk/Thumbs.db', reason: 'Thumbs.db' },
        { path: 'only-junk/', reason: 'empty-folder' },
        { path: 'empty/', reason: 'empty-folder' },
        { path: 'docs/desktop.ini', reason: 'desktop.ini' },
        { path: 'docs/tmp/cache.tmp', reason: 'pattern:**/*.tmp' },
      ]),
    );
    expect(report.removed).toHaveLength(9);
    expect(progress.at(-1)).toBe(1);
  });

  it('keeps file names intact: UTF-8 names, and CP437 names (no UTF-8 flag) come out as the same characters', async () => {
    const { source, target } = paths();
    await writeRawZip(source, [
      { name: '报告/机密 图片.txt', data: Buffer.from('中文'), flags: 0x800 },
      { name: 'Ärger/naïve.txt', data: Buffer.from('x'), flags: 0x800 },
      // "Grüße.txt" in CP437: ü = 0x81, ß = 0xE1.
      { name: Buffer.from([0x47, 0x72, 0x81, 0xe1, 0x65, 0x2e, 0x74, 0x78, 0x74]), data: Buffer.from('y') },
    ]);
    await cleanArchive(source, target);
    const out = await readZip(target);
    expect([...out.keys()].sort()).toEqual(['Grüße.txt', 'Ärger/naïve.txt', '报告/机密 图片.txt'].sort());
    expect(out.get('报告/机密 图片.txt')?.toString()).toBe('中文');
  });

  const refused = async (
    entries: Parameters<typeof writeRawZip>[1] | Buffer,
    code: string,
    limits?: object,
  ) => {
    const { source, target } = paths();
    if (Buffer.isBuffer(entries)) await writeFile(source, entries);
    else await writeRawZip(source, entries);
    await expect(
      cleanArchive(source, target, {}, limits ? { limits: { ...limitsBase, ...limits } } : {}),
    ).rejects.toMatchObject({ code, options: { retryable: false } });
    expect(existsSync(target)).toBe(false);
    expect(existsSync(`${target}.partial`)).toBe(false);
  };
  const limitsBase = { maxEntries: 10_000, maxTotalBytes: 2 ** 30, maxCompressionRatio: 200 };
  const ok = { name: 'ok.txt', data: Buffer.from('fine') };

  it('refuses a path that leaves the folder', () =>
    refused([ok, { name: 'a/../../etc/passwd', data: Buffer.from('x') }], 'ARCHIVE_UNSAFE_PATH'));
  it('refuses an absolute path', () =>
    refused([ok, { name: '/etc/passwd', data: Buffer.from('x') }], 'ARCHIVE_UNSAFE_PATH'));
  it('refuses a Windows drive path', () =>
    refused([{ name: 'C:\\Windows\\evil.dll', data: Buffer.from('x') }], 'ARCHIVE_UNSAFE_PATH'));
  it('refuses a symbolic link', () =>
    refused([ok, { name: 'link', data: Buffer.from('/etc/passwd'), unixMode: 0o120777 }], 'ARCHIVE_SYMLINK'));
  it('refuses an encrypted entry', () =>
    refused([ok, { name: 'secret.txt', data: Buffer.from('x'), flags: 0x1 }], 'ARCHIVE_ENCRYPTED'));
  it('refuses strong encryption too', () =>
    refused([ok, { name: 'secret.txt', data: Buffer.from('x'), flags: 0x41 }], 'ARCHIVE_ENCRYPTED'));
  it('refuses more entries than the limit', () =>
    refused(
      Array.from({ length: 6 }, (_, i) => ({ name: `f${i}.txt`, data: Buffer.from('x') })),
      'ARCHIVE_TOO_MANY_ENTRIES',
      { maxEntries: 5 },
    ));
  it('refuses more bytes in all than the limit', () =>
    refused(
      [
        { name: 'a.bin', data: Buffer.alloc(600) },
        { name: 'b.bin', data: Buffer.alloc(600) },
      ],
      'ARCHIVE_TOO_LARGE',
      { maxTotalBytes: 1_000 },
    ));
  it('refuses an entry that inflates past the ratio (a ZIP bomb)', () =>
    refused(
      [ok, { name: 'zeros.bin', data: Buffer.alloc(20 * 2 ** 20), deflate: true }],
      'ARCHIVE_COMPRESSION_RATIO',
    ));
  it('refuses a file that is not a ZIP', () =>
    refused(Buffer.from('%PDF-1.7 not a zip at all'), 'ARCHIVE_INVALID'));
  it('refuses an entry whose data does not match its declared size', () =>
    refused(
      [{ name: 'liar.bin', data: Buffer.alloc(5000, 7), deflate: true, declaredSize: 100 }],
      'ARCHIVE_INVALID',
    ));
});

describe('names from Windows in other locales (no UTF-8 flag)', () => {
  /** A ZIP whose names are raw bytes in `encoding`, no UTF-8 flag: what the archiving tool of that locale writes. */
  const legacyZip = async (encoding: string, names: string[]) => {
    const { source, target } = paths();
    await writeRawZip(
      source,
      names.map((name) => ({
        name: iconv.encode(name, encoding),
        data: Buffer.from(name.endsWith('/') ? '' : `content of ${name}`),
      })),
    );
    // The fixture is what it claims: Python reads these names right when told the encoding.
    expect(pythonZipNames(source, encoding)).toEqual(names);
    return { source, target };
  };

  /** Cleans, then reads the names back with three independent readers (yauzl, Python's zipfile, zipinfo). */
  const cleanedNames = async (source: string, target: string, rules = {}) => {
    const report = await cleanArchive(source, target, rules);
    const names = [...(await readZip(target)).keys()];
    expect(pythonZipNames(target)).toEqual(names);
    expect(zipinfoNames(target)).toEqual(names);
    return { names, report };
  };

  it('GBK from Chinese Windows: the names come out right, written as flagged UTF-8', async () => {
    const files = ['报告.txt', '资料/照片1.jpg', '资料/说明.docx', '新建文件夹/年度总结.pptx'];
    const { source, target } = await legacyZip('gbk', files);
    const { names, report } = await cleanedNames(source, target);
    expect(names).toEqual(files);
    expect(report.nameEncoding).toBe('gb18030');
    expect((await readZip(target)).get('资料/说明.docx')?.toString()).toBe('content of 资料/说明.docx');
  });

  it('a lone short GBK name is read right too', async () => {
    const { source, target } = await legacyZip('gbk', ['报告.txt']);
    expect((await cleanedNames(source, target)).names).toEqual(['报告.txt']);
  });

  it('Shift-JIS from Japanese Windows, with characters whose second byte is 0x5C (a backslash in CP437)', async () => {
    // ソ is 0x83 0x5C and 表 is 0x95 0x5C: read as CP437 they split the name into folders.
    const files = ['資料.txt', 'ソフト/表示テスト.xlsx', '写真/旅行.jpg'];
    const { source, target } = await legacyZip('shift_jis', files);
    const { names, report } = await cleanedNames(source, target);
    expect(names).toEqual(files);
    expect(report.nameEncoding).toBe('cp932');
  });

  it('real CP437 (accents and box drawing) stays CP437', async () => {
    const files = ['╔═╗ Übersicht.txt', 'café/naïve résumé.doc', 'Grüße.txt'];
    const { source, target } = await legacyZip('cp437', files);
    const { names, report } = await cleanedNames(source, target);
    expect(names).toEqual(files);
    expect(report.nameEncoding).toBe('cp437');
  });

  it('UTF-8 written without the flag (Linux and macOS tools) is read as UTF-8', async () => {
    const files = ['报告.txt', 'Ärger/naïve.txt'];
    const { source, target } = await legacyZip('utf-8', files);
    expect((await cleanedNames(source, target)).names).toEqual(files);
  });

  it('an Info-ZIP Unicode Path extra field is taken over the raw name; a caller can name the encoding', async () => {
    const { source, target } = paths();
    const raw = iconv.encode('简历.doc', 'gbk');
    await writeRawZip(source, [
      { name: raw, data: Buffer.from('x'), extra: unicodePathField(raw, '简历 (Unicode).doc') },
    ]);
    expect((await cleanedNames(source, target)).names).toEqual(['简历 (Unicode).doc']);
    const plain = paths();
    await writeRawZip(plain.source, [{ name: raw, data: Buffer.from('x') }]);
    const named = await cleanedNames(plain.source, plain.target, { nameEncoding: 'gbk' });
    expect(named.names).toEqual(['简历.doc']);
    expect(named.report.nameEncoding).toBe('gb18030');
  });

  it('junk and unsafe paths are judged on the decoded names, and reported with them', async () => {
    const { source, target } = await legacyZip('gbk', ['报告/照片.jpg', '报告/Thumbs.db']);
    const { names, report } = await cleanedNames(source, target);
    expect(names).toEqual(['报告/照片.jpg']);
    expect(report.removed).toEqual([{ path: '报告/Thumbs.db', reason: 'Thumbs.db' }]);
    const unsafe = await legacyZip('gbk', ['报告.txt', '报告/../../etc/密码']);
    await expect(cleanArchive(unsafe.source, unsafe.target)).rejects.toMatchObject({
      code: 'ARCHIVE_UNSAFE_PATH',
      message: "an entry leaves the archive's folder: 报告/../../etc/密码",
    });
  });
});
