import { describe, expect, it } from 'vitest';
import { TtlCache } from '../src/core/shared/ttlCache.ts';
import { RecentInFlightCounts } from '../src/features/tasks/inFlightCounts.ts';

/** A load the test answers when it chooses, counting how often it was started. */
function gate<V>() {
  const started: ((value: V | null) => void)[] = [];
  return {
    started,
    load: () => new Promise<V | null>((resolve) => started.push(resolve)),
  };
}

const clockAt = (ms: { now: number }) => ({ now: () => new Date(ms.now) });

describe('TtlCache', () => {
  it('callers that miss while their key loads share that load', async () => {
    const cache = new TtlCache<string>(clockAt({ now: 0 }), 1_000);
    const loads = gate<string>();
    const all = Promise.all([1, 2, 3].map(() => cache.get('k', loads.load)));
    await Promise.resolve();
    expect(loads.started).toHaveLength(1);
    loads.started[0]!('v');
    expect(await all).toEqual(['v', 'v', 'v']);
    // Remembered for its TTL: no new load.
    expect(await cache.get('k', loads.load)).toBe('v');
    expect(loads.started).toHaveLength(1);
  });

  it('other keys load on their own', async () => {
    const cache = new TtlCache<string>(clockAt({ now: 0 }), 1_000);
    const loads = gate<string>();
    const a = cache.get('a', loads.load);
    const b = cache.get('b', loads.load);
    expect(loads.started).toHaveLength(2);
    loads.started[0]!('A');
    loads.started[1]!('B');
    expect([await a, await b]).toEqual(['A', 'B']);
  });

  it('a delete during a load keeps its result out of the cache', async () => {
    const cache = new TtlCache<string>(clockAt({ now: 0 }), 1_000);
    const loads = gate<string>();
    const before = cache.get('k', loads.load);
    cache.delete('k');
    // A caller after the delete does not share the load that began before it.
    const after = cache.get('k', loads.load);
    expect(loads.started).toHaveLength(2);
    loads.started[0]!('old');
    loads.started[1]!('new');
    expect([await before, await after]).toEqual(['old', 'new']);
    expect(await cache.get('k', loads.load)).toBe('new');
    expect(loads.started).toHaveLength(2);
  });

  it('a failed load is shared by its callers and not remembered', async () => {
    const cache = new TtlCache<string>(clockAt({ now: 0 }), 1_000);
    let calls = 0;
    const failing = async () => {
      calls += 1;
      throw new Error('down');
    };
    const results = await Promise.allSettled([cache.get('k', failing), cache.get('k', failing)]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(calls).toBe(1);
    expect(await cache.get('k', async () => 'up')).toBe('up');
  });

  it('a missing row is not remembered, and a value is loaded again after its TTL', async () => {
    const time = { now: 0 };
    const cache = new TtlCache<string>(clockAt(time), 1_000);
    expect(await cache.get('k', async () => null)).toBeNull();
    expect(await cache.get('k', async () => 'v1')).toBe('v1');
    time.now = 999;
    expect(await cache.get('k', async () => 'v2')).toBe('v1');
    time.now = 1_000;
    expect(await cache.get('k', async () => 'v2')).toBe('v2');
  });
});

describe('RecentInFlightCounts', () => {
  it('creates arriving while the count is read share one read, and each counts once', async () => {
    let reads = 0;
    let answer: (n: { count: number; limit: number }) => void = () => {};
    const counts = new RecentInFlightCounts(
      {
        inFlight: () => {
          reads += 1;
          return new Promise((resolve) => {
            answer = resolve;
          });
        },
      },
      clockAt({ now: 0 }),
    );
    const seen = Promise.all([1, 2, 3].map(() => counts.inFlight('app', 10)));
    await Promise.resolve();
    answer({ count: 4, limit: 10 });
    expect((await seen).map((c) => c.count)).toEqual([4, 5, 6]);
    expect(reads).toBe(1);
    expect((await counts.inFlight('app', 10)).count).toBe(7);
  });
});
