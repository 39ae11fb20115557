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

  it('a channel kept only while followed stores nothing nobody follows, and what a follower cut off needs', async () => {
    let now = 0;
    const engine = new MemoryEngine(
      () => ({ size: 10, ttlMs: 1_000, whileFollowed: true }),
      () => now,
    );
    engine.publishNow('detail', 'unseen');
    // Not even a stream: one per task would otherwise stay for the meta TTL.
    expect(engine.size).toBe(0);
    const unseen = engine.readNow('detail', { limit: -1 });
    expect(unseen.ok && unseen.publications).toEqual([]);
    await engine.watch('detail');
    engine.publishNow('detail', 'followed');
    await engine.unwatch('detail');
    now = 900; // cut off, back within the TTL: the gap is kept for recovery
    engine.publishNow('detail', 'during a blip');
    now = 2_500; // nobody for longer than the TTL: no longer kept
    engine.publishNow('detail', 'long after');
    const kept = engine.readNow('detail', { limit: -1 });
    expect(kept.ok && kept.publications.map((p) => p.data)).toEqual([]);
    expect(kept.position.offset).toBe(3); // a stream that was followed still counts every publication
    now = 1_500;
    const other = new MemoryEngine(
      () => ({ size: 10, ttlMs: 1_000, whileFollowed: true }),
      () => now,
    );
    await other.watch('d');
    other.publishNow('d', 1);
    await other.unwatch('d');
    now = 2_000;
    other.publishNow('d', 2);
    const recovered = other.readNow('d', { limit: -1 });
    expect(recovered.ok && recovered.publications.map((p) => p.data)).toEqual([1, 2]);
    // Channels without the option keep everything, followed or not (Centrifugo's behaviour).
    const plain = new MemoryEngine(
      () => ({ size: 10, ttlMs: 1_000 }),
      () => now,
    );
    plain.publishNow('user', 'x');
    const all = plain.readNow('user', { limit: -1 });
    expect(all.ok && all.publications.map((p) => p.data)).toEqual(['x']);
  });
});
