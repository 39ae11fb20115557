/**
 * A few seconds of memory for rows that every request reads (credentials). A missing row is never
 * remembered, so a key created a moment ago works at once; a change made elsewhere shows within `ttlMs`.
 */
import type { Clock } from './ports.ts';

export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; loadedAt: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  async get(key: string, load: () => Promise<V | null>): Promise<V | null> {
    const now = this.clock.now().getTime();
    const cached = this.entries.get(key);
    if (cached && now - cached.loadedAt < this.ttlMs) return cached.value;
    const value = await load();
    if (value === null) {
      this.entries.delete(key);
      return null;
    }
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(key, { value, loadedAt: now });
    return value;
  }

  delete(key?: string): void {
    if (key === undefined) this.entries.clear();
    else this.entries.delete(key);
  }
}
