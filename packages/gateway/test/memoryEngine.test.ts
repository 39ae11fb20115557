import { describe, expect, it } from 'vitest';
import { MemoryEngine } from '../src/memoryEngine.ts';

describe('MemoryEngine', () => {
  it('numbers publications from 1 per channel and keeps the newest `size` of them', () => {
    const engine = new MemoryEngine(() => ({ size: 3, ttlMs: 60_000 }));
    for (let i = 1; i <= 5; i += 1) expect(engine.publishNow('a', i).offset).toBe(i);
    expect(engine.publishNow('b', 'x').offset).toBe(1);
    const all = engine.readNow('a', { limit: -1 });
    expect(all.ok && all.publications.map((p) => p.offset)).toEqual([3, 4, 5]);
    expect(all.position.offset).toBe(5);
  });

  it('reads after a position, newest first with reverse, and refuses another epoch', () => {
    const engine = new MemoryEngine(() => ({ size: 10, ttlMs: 60_000 }));
    for (let i = 1; i <= 4; i += 1) engine.publishNow('a', i);
    const { epoch } = engine.readNow('a', { limit: 0 }).position;
    const after = engine.readNow('a', { since: { offset: 2, epoch }, limit: -1 });
    expect(after.ok && after.publications.map((p) => p.data)).toEqual([3, 4]);
    const reverse = engine.readNow('a', { since: { offset: 4 }, limit: 2, reverse: true });
    expect(reverse.ok && reverse.publications.map((p) => p.data)).toEqual([3, 2]);
    expect(engine.readNow('a', { limit: 0 })).toMatchObject({ ok: true, publications: [] });
    expect(engine.readNow('a', { since: { offset: 2, epoch: 'other' }, limit: -1 }).ok).toBe(false);
    // A new engine (a restarted gateway) has a new epoch: old positions cannot be recovered.
    expect(
      new MemoryEngine(() => ({ size: 10, ttlMs: 1 })).readNow('a', { limit: 0 }).position.epoch,
    ).not.toBe(epoch);
  });

  it('forgets publications older than the TTL but keeps the position', () => {
    let now = 0;
    const engine = new MemoryEngine(
      () => ({ size: 10, ttlMs: 1_000 }),
      () => now,
    );
    engine.publishNow('a', 1);
    now = 500;
    engine.publishNow('a', 2);
    now = 1_200;
    const result = engine.readNow('a', { limit: -1 });
    expect(result.ok && result.publications.map((p) => p.data)).toEqual([2]);
    expect(result.position.offset).toBe(2);
  });

  it('forgets channels idle past the meta TTL, so memory does not grow with every task ever seen', () => {
    let now = 0;
    const engine = new MemoryEngine(
      () => ({ size: 10, ttlMs: 1_000 }),
      () => now,
      5_000,
    );
    engine.publishNow('old', 1);
    engine.publishNow('busy', 1);
    const { epoch } = engine.readNow('old', { limit: 0 }).position;
    now = 4_000;
    engine.publishNow('busy', 2);
    engine.sweep();
    expect(engine.size).toBe(2);
    now = 6_000;
    engine.sweep();
    // 'old' was idle past 5 s with no history left; 'busy' was used 2 s ago.
    expect(engine.size).toBe(1);
    const again = engine.readNow('old', { since: { offset: 1, epoch }, limit: -1 });
    expect(again.ok).toBe(false);
  });
});
