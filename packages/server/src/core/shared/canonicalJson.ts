import { createHash } from 'node:crypto';

/** Text to write as it is, among the values still to serialise. */
class Token {
  constructor(readonly text: string) {}
}
const closeArray = new Token(']');
const closeObject = new Token('}');
const comma = new Token(',');

/**
 * JSON with object keys sorted at every level, so equal values always serialise to equal text. It works
 * from a list of its own rather than recursing: however deep a value nests, it cannot overflow the stack.
 */
export function canonicalJson(value: unknown): string {
  let text = '';
  // What is left to write, the next on top: values, and the tokens between them.
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (next instanceof Token) text += next.text;
    else if (next === null || typeof next !== 'object') text += JSON.stringify(next) ?? 'null';
    else if (Array.isArray(next)) {
      text += '[';
      pending.push(closeArray);
      for (let i = next.length - 1; i >= 0; i--) {
        pending.push(next[i]);
        if (i > 0) pending.push(comma);
      }
    } else {
      const entries = Object.entries(next as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      text += '{';
      pending.push(closeObject);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, item] = entries[i]!;
        pending.push(item, new Token(`${i > 0 ? ',' : ''}${JSON.stringify(key)}:`));
      }
    }
  }
  return text;
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** A stable fingerprint of a request: same meaning → same hash, whatever the key order. */
export function fingerprint(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}
