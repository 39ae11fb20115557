import type { Clock } from '../shared/ports.ts';
import { TtlCache } from '../shared/ttlCache.ts';
import { keyIsUsable, parseApiKey, secretMatches } from './apiKeys.ts';
import type { ApiKeyRecord, ApplicationPrincipal, IdentityStore } from './ports.ts';

/**
 * Resolves `Authorization: Bearer <api key>` to an application principal. Key rows are cached for a few
 * seconds because every request authenticates; a revocation drops the entry at once, in every replica
 * (the identity feature's revocations call `forget`), and `cacheTtlMs` is only the net under a lost
 * notification.
 */
export class ApiKeyAuthenticator {
  private readonly cache: TtlCache<ApiKeyRecord>;

  constructor(
    private readonly store: IdentityStore,
    private readonly clock: Clock,
    cacheTtlMs: number,
  ) {
    this.cache = new TtlCache(clock, cacheTtlMs);
  }

  async authenticate(plaintextKey: string): Promise<ApplicationPrincipal | null> {
    const parsed = parseApiKey(plaintextKey);
    if (!parsed) return null;
    const record = await this.cache.get(parsed.keyId, () => this.store.findApiKey(parsed.keyId));
    if (!record || !secretMatches(parsed.secret, record.secretHash)) return null;
    if (!keyIsUsable(record, this.clock.now())) return null;
    return {
      kind: 'application',
      tenantId: record.tenantId,
      applicationId: record.applicationId,
      keyId: record.id,
      userView: record.userView,
    };
  }

  /**
   * Whether the key that minted a token (a user or realtime token's `akid`) is still usable: the same
   * cached row as `authenticate`, so the check costs no query per request.
   */
  async keyActive(keyId: string): Promise<boolean> {
    const record = await this.cache.get(keyId, () => this.store.findApiKey(keyId));
    return record !== null && keyIsUsable(record, this.clock.now());
  }

  forget(keyId?: string): void {
    this.cache.delete(keyId);
  }
}
