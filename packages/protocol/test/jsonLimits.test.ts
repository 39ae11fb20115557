/** The JSON limits every way into TDP checks (jsonLimits.ts): depth, unpaired surrogates, their paths. */
import { describe, expect, it } from 'vitest';
import {
  defaultJsonMaxDepth,
  JsonShapeError,
  jsonMaxDepthCeiling,
  jsonShapeFault,
  parseCheckedJson,
} from '../src/index.ts';

const arrays = (levels: number) => JSON.parse(`${'['.repeat(levels)}${']'.repeat(levels)}`);

describe('jsonShapeFault', () => {
  it('takes JSON up to the depth limit (64 by default) and refuses one level more', () => {
    expect(defaultJsonMaxDepth).toBe(64);
    expect(jsonShapeFault(arrays(64))).toBeNull();
    expect(jsonShapeFault(arrays(65))).toMatchObject({ code: 'JSON_TOO_DEEP' });
    expect(jsonShapeFault({ a: { b: [1] } }, 3)).toBeNull();
    expect(jsonShapeFault({ a: { b: [[]] } }, 3)).toMatchObject({ code: 'JSON_TOO_DEEP' });
    expect(jsonShapeFault('scalar', 0)).toBeNull();
  });

  it('stops at the limit however deep the value goes, and never honours a limit past the ceiling', () => {
    expect(jsonShapeFault(arrays(1_000_000))?.code).toBe('JSON_TOO_DEEP');
    expect(jsonShapeFault(arrays(1_000_000), 10 ** 9)?.detail).toContain(`${jsonMaxDepthCeiling} levels`);
    expect(jsonShapeFault(arrays(10), Number.NaN)).toBeNull();
  });

  it('refuses an unpaired surrogate in a string or a key, naming where (a key: its object)', () => {
    const cases: [string, string][] = [
      ['"\\ud800"', ''],
      ['{"a":["ok","x\\udc00y"]}', '/a/1'],
      ['{"a":{"b":"\\ude00\\ud83d"}}', '/a/b'],
      ['{"a":[{"\\ud83dx":1}]}', '/a/0'],
      ['{"s/l~":["\\udbff"]}', '/s~1l~0/0'],
    ];
    for (const [text, path] of cases)
      expect(jsonShapeFault(JSON.parse(text)), text).toMatchObject({ code: 'JSON_UNPAIRED_SURROGATE', path });
  });

  it('takes well-formed pairs and plain text', () => {
    expect(
      jsonShapeFault(JSON.parse('{"\\ud83d\\ude00":["\\ud83d\\ude00", "é", 1, null, true]}')),
    ).toBeNull();
  });
});

describe('parseCheckedJson', () => {
  it('parses, refuses a fault with JsonShapeError and bad syntax with SyntaxError', () => {
    expect(parseCheckedJson('{"a":[1]}')).toEqual({ a: [1] });
    expect(() => parseCheckedJson('{"a":"\\ud800"}')).toThrow(JsonShapeError);
    expect(() => parseCheckedJson('[[1]]', 1)).toThrow(JsonShapeError);
    expect(() => parseCheckedJson('{')).toThrow(SyntaxError);
  });
});
