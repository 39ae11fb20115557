/**
 * `npm run bench -- names`: how often the names of a ZIP without the UTF-8 flag come out right, per code
 * page, on archives of 1 to 30 short file names made from everyday words (a seeded draw, so every run
 * sees the same archives). Beside it in the same run: jschardet asked with its own defaults over the
 * whole names (the library alone), and the floor, CP437 for every name (what main did).
 * `BENCH_NAMES_TRIALS` changes the number of archives per code page and size.
 */
import iconv from 'iconv-lite';
import { detectNameEncoding } from '../packages/capabilities/src/zipNames.ts';
import { sane, sized } from './support.ts';

const trials = sized('BENCH_NAMES_TRIALS', 200, 10);
const sizes = [1, 3, 10, 30];

/** Everyday file and folder names, as a person of each locale writes them. */
const vocabularies: Record<string, string[]> = {
  gbk: [
    '报告',
    '资料',
    '新建文件夹',
    '图片',
    '照片',
    '说明',
    '合同',
    '机密',
    '年度总结',
    '会议记录',
    '发票',
    '简历',
    '数据',
    '截图',
    '项目计划',
    '财务报表',
    '用户手册',
    '测试',
    '备份',
    '通知',
  ],
  shift_jis: [
    '資料',
    '報告書',
    '写真',
    '旅行',
    '家族',
    '新しいフォルダー',
    'テスト',
    '日本語',
    '見積書',
    '議事録',
    '請求書',
    '契約書',
    '会議',
    'プレゼン',
    'まとめ',
    '画像',
    'ソフト',
    '表示',
    'スケジュール',
    '名簿',
  ],
  big5: [
    '報告',
    '資料夾',
    '檔案',
    '會議記錄',
    '照片',
    '說明',
    '合約',
    '機密',
    '簡報',
    '財務報表',
    '產品介紹',
    '使用手冊',
    '測試',
    '備份',
    '文件',
  ],
  cp949: [
    '보고서',
    '사진',
    '여행',
    '새 폴더',
    '문서',
    '회의록',
    '계약서',
    '자료',
    '견적서',
    '발표',
    '이력서',
    '테스트',
    '백업',
    '음악',
    '동영상',
  ],
  cp437: [
    'Grüße',
    'Übersicht',
    'Straße',
    'año',
    'niño',
    'España',
    'café',
    'résumé',
    'naïve',
    'Ärger',
    'Bücher',
    'Größe',
    'Zürich',
    'Málaga',
    'Noël',
    'façade',
    'señor',
    'München',
    'Präsentation',
    'Bestätigung',
    'Ålesund',
    'smörgåsbord',
    '╔═╗ box',
    '½ price',
  ],
};
const endings = ['.txt', '.pdf', '.docx', '.xlsx', '.jpg', ' 1.jpg', ' (2).png', '_final.doc'];

/** mulberry32: a small seeded generator, so that the archives are the same in every run. */
function generator(seed: number): (n: number) => number {
  let state = seed;
  return (n) => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

/** One archive's names: an optional folder, a few words reused (as real archives do), an ending each. */
function archiveNames(words: string[], count: number, pick: (n: number) => number): string[] {
  const folder = pick(2) ? `${words[pick(words.length)]}/` : '';
  const used = Array.from({ length: 1 + pick(4) }, () => words[pick(words.length)]!);
  return Array.from(
    { length: count },
    () => folder + used[pick(used.length)] + endings[pick(endings.length)],
  );
}

export async function benchNames(): Promise<void> {
  const { chardet } = await import('jschardet');
  const pick = generator(19);
  const rows: string[][] = [];
  for (const [encoding, words] of Object.entries(vocabularies)) {
    const right = { ours: 0, library: 0, cp437: 0, total: 0 };
    for (const count of sizes)
      for (let trial = 0; trial < trials; trial += 1) {
        const names = archiveNames(words, count, pick);
        const raws = names.map((name) => iconv.encode(name, encoding));
        const readsRight = (guess: string | null | undefined) =>
          !!guess &&
          iconv.encodingExists(guess) &&
          raws.every((raw, i) => iconv.decode(raw, guess) === names[i]);
        const whole = Buffer.concat(raws.flatMap((raw) => [raw, Buffer.from('\n')]));
        right.total += 1;
        if (readsRight(await detectNameEncoding(raws))) right.ours += 1;
        if (readsRight(chardet.detect(whole).encoding)) right.library += 1;
        if (readsRight('cp437')) right.cp437 += 1;
      }
    const percent = (n: number) => `${((100 * n) / right.total).toFixed(1)} %`;
    rows.push([encoding, percent(right.ours), percent(right.library), percent(right.cp437)]);
    sane(right.ours > 0, `names in ${encoding} are read right at least once`);
  }
  console.log(
    `ZIP names without the UTF-8 flag read right (${trials} archives of each of ${sizes.join(', ')} names)`,
  );
  console.log(['code page', 'TDP (zipNames.ts)', 'jschardet, defaults', 'CP437 (main)'].join(' | '));
  for (const row of rows) console.log(row.join(' | '));
}
