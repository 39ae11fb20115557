/**
 * A few seconds of memory for rows that every request reads (credentials, counts). A missing row is
 * never remembered, so a key created a moment ago works at once; a change made elsewhere shows within
 * `ttlMs`. Callers that miss while a load of their key is in flight share it: under load, a read that
 * takes 50 ms would otherwise run once for each request arriving in those 50 ms.
 */
import type { Clock } from './ports.ts';

export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; loadedAt: number }>();
  private readonly loading = new Map<string, Promise<V | null>>();

  constructor(
    private readonly clock: Clock,
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  async get(key: string, load: () => Promise<V | null>): Promise<V | null> {
    const now = this.clock.now().getTime();
    const cached = this.entries.get(key);
    if (cached && now - cached.loadedAt < this.ttlMs) return cached.value;
    const inFlight = this.loading.get(key);
    if (inFlight) return inFlight;
    const loaded = load().then(
      (value) => {
        // Kept only if no `delete` came during the load: what it read may be what was deleted.
        if (this.loading.get(key) !== loaded) return value;
        this.loading.delete(key);
        if (value === null) this.entries.delete(key);
        else {
          if (this.entries.size >= this.maxEntries) this.entries.clear();
          this.entries.set(key, { value, loadedAt: now });
        }
        return value;
      },
      (error: unknown) => {
        if (this.loading.get(key) === loaded) this.loading.delete(key);
        throw error;
      },
    );
    this.loading.set(key, loaded);
    return loaded;
  }

  delete(key?: string): void {
    if (key === undefined) {
      this.entries.clear();
      this.loading.clear();
    } else {
      this.entries.delete(key);
      this.loading.delete(key);
    }
  }
}
