import { describe, expect, it } from 'vitest';
import { isUuid, newId } from '../src/ids.ts';

describe('newId', () => {
  it('is a UUIDv7 whose first 48 bits are the current Unix milliseconds', () => {
    const before = Date.now();
    const id = newId();
    const after = Date.now();
    expect(isUuid(id)).toBe(true);
    expect(id[14]).toBe('7');
    expect(['8', '9', 'a', 'b']).toContain(id[19]);
    const ms = Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(after);
  });

  it('sorts in creation order, also within one millisecond, and never repeats', () => {
    const ids = Array.from({ length: 200_000 }, () => newId());
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < ids.length; i += 1) {
      if (!(ids[i - 1]! < ids[i]!)) throw new Error(`${ids[i - 1]} is not before ${ids[i]} (#${i})`);
    }
    // Many ids shared a millisecond, so the counter (not only the clock) carried the order.
    const millis = new Set(ids.map((id) => id.slice(0, 13)));
    expect(millis.size).toBeLessThan(ids.length / 10);
  });

  it('keeps its random part random: the last 32 bits differ across ids of one millisecond', () => {
    const tails = new Set(Array.from({ length: 1000 }, () => newId().slice(-8)));
    expect(tails.size).toBeGreaterThan(990);
  });
});
