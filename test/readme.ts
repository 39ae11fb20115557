/** The README's code, as the tests that run it as written read it. */
import { readFileSync } from 'node:fs';

const readmePath = new URL('../README.md', import.meta.url);

/** The first fenced block of `language` in the README's section under `heading` (e.g. `### With curl`). */
export function readmeBlock(heading: string, language: string): string {
  const lines = readFileSync(readmePath, 'utf8').split('\n');
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`README.md has no section "${heading}"`);
  const level = heading.indexOf(' ');
  let fence: string | null = null;
  const block: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (fence === null) {
      // The section ends at the next heading of its level or higher (only outside code blocks).
      const heading = /^(#+) /.exec(line);
      if (heading && heading[1]!.length <= level) break;
      if (line.startsWith('```')) fence = line.slice(3);
    } else if (line === '```') {
      if (fence === language) return `${block.join('\n')}\n`;
      fence = null;
    } else if (fence === language) block.push(line);
  }
  throw new Error(`README.md has no ${language} block under "${heading}"`);
}
