import type { Clock } from '../shared/ports.ts';
import { keyIsUsable, parseApiKey, secretMatches } from './apiKeys.ts';
import type { ApiKeyRecord, ApplicationPrincipal, IdentityStore } from './ports.ts';

/**
 * Resolves `Authorization: Bearer <api key>` to an application principal. Key rows are cached for a few
 * seconds because every request authenticates; a revocation made through this process drops the entry at
 * once, one made elsewhere takes effect within `cacheTtlMs`.
 */
export class ApiKeyAuthenticator {
  private readonly cache = new Map<string, { record: ApiKeyRecord; loadedAt: number }>();

  constructor(
    private readonly store: IdentityStore,
    private readonly clock: Clock,
    private readonly cacheTtlMs = 5_000,
    private readonly maxCacheEntries = 10_000,
  ) {}

  async authenticate(plaintextKey: string): Promise<ApplicationPrincipal | null> {
    const parsed = parseApiKey(plaintextKey);
    if (!parsed) return null;
    const record = await this.load(parsed.keyId);
    if (!record || !secretMatches(parsed.secret, record.secretHash)) return null;
    if (!keyIsUsable(record, this.clock.now())) return null;
    return {
      kind: 'application',
      tenantId: record.tenantId,
      applicationId: record.applicationId,
      keyId: record.id,
    };
  }

  forget(keyId?: string): void {
    if (keyId) this.cache.delete(keyId);
    else this.cache.clear();
  }

  private async load(keyId: string): Promise<ApiKeyRecord | null> {
    const now = Date.now();
    const cached = this.cache.get(keyId);
    if (cached && now - cached.loadedAt < this.cacheTtlMs) return cached.record;
    const record = await this.store.findApiKey(keyId);
    if (!record) {
      this.cache.delete(keyId);
      return null;
    }
    if (this.cache.size >= this.maxCacheEntries) this.cache.clear();
    this.cache.set(keyId, { record, loadedAt: now });
    return record;
  }
}
