import type { DefinitionLookup, DefinitionStore, StoredDefinition } from './ports.ts';

/**
 * Read access to published definitions. A published name + version never changes, so found definitions
 * are cached for the life of the process; misses are not cached (the version may be published later).
 */
export class DefinitionCatalog implements DefinitionLookup {
  private readonly cache = new Map<string, StoredDefinition>();

  constructor(
    private readonly store: DefinitionStore,
    private readonly maxEntries = 5_000,
  ) {}

  async resolve(tenantId: string, name: string, version: string): Promise<StoredDefinition | null> {
    const key = `${tenantId}\u0000${name}\u0000${version}`;
    const cached = this.cache.get(key);
    if (cached) return cached;
    const found = await this.store.get(tenantId, name, version);
    if (found) {
      if (this.cache.size >= this.maxEntries) this.cache.clear();
      this.cache.set(key, found);
    }
    return found;
  }
}
