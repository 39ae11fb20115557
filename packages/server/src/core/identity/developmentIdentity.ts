import { AppError } from '../shared/errors.ts';
import { hashSecret, keyIsUsable, parseApiKey, secretMatches } from './apiKeys.ts';
import { type ApplicationDeps, createApplication, rotateApiKey } from './applications.ts';
import type { Application } from './ports.ts';
import { createTenant } from './tenants.ts';

export const developmentTenantName = 'development';
export const developmentApplicationName = 'development';

export interface DevelopmentKeys {
  /** TDP_DEV_API_KEY: must end up valid, or we fail loudly. */
  fixedKey?: string | null;
  /** The key remembered from the previous run: kept while it still works, replaced otherwise. */
  rememberedKey?: string | null;
}

/** Whether `plaintext` is a live key of `application`; inserts it when `insertIfMissing` and unknown. */
async function keyWorks(
  deps: ApplicationDeps,
  application: Application,
  plaintext: string,
  insertIfMissing: boolean,
): Promise<boolean> {
  const parsed = parseApiKey(plaintext);
  if (!parsed) {
    if (!insertIfMissing) return false;
    throw new AppError(
      'VALIDATION_FAILED',
      'the development API key must look like tdp_<16 letters or digits>_<43 base64url characters>',
    );
  }
  const existing = await deps.store.findApiKey(parsed.keyId);
  if (existing) {
    const works =
      existing.applicationId === application.id &&
      secretMatches(parsed.secret, existing.secretHash) &&
      keyIsUsable(existing, deps.clock.now());
    if (!works && insertIfMissing) {
      throw new AppError(
        'VALIDATION_FAILED',
        "the fixed development API key exists but is revoked, expired or not the development application's",
      );
    }
    return works;
  }
  if (!insertIfMissing) return false;
  await deps.store.insertApiKey({
    id: parsed.keyId,
    applicationId: application.id,
    tenantId: application.tenantId,
    secretHash: hashSecret(parsed.secret),
    label: 'development (fixed)',
    createdAt: deps.clock.now(),
    expiresAt: null,
    revokedAt: null,
    userView: application.userView,
  });
  return true;
}

/**
 * Makes sure the development tenant, application and API key exist (used by `tdp dev`), and returns the
 * key to print. The callback secret is returned only when the application was created by this call.
 */
export async function ensureDevelopmentIdentity(
  deps: ApplicationDeps,
  keys: DevelopmentKeys,
): Promise<{ tenantId: string; applicationId: string; apiKey: string; callbackSecret: string | null }> {
  const tenant =
    (await deps.store.findTenantByName(developmentTenantName)) ??
    (await createTenant(deps, developmentTenantName));
  const found = await deps.store.findApplicationByName(tenant.id, developmentApplicationName);
  const created = found
    ? null
    : await createApplication(deps, { tenantId: tenant.id, name: developmentApplicationName });
  const application = found ?? created!.application;
  const answer = (apiKey: string) => ({
    tenantId: tenant.id,
    applicationId: application.id,
    apiKey,
    callbackSecret: created?.callbackSecret ?? null,
  });

  if (keys.fixedKey) {
    await keyWorks(deps, application, keys.fixedKey, true);
    return answer(keys.fixedKey);
  }
  if (keys.rememberedKey && (await keyWorks(deps, application, keys.rememberedKey, false))) {
    return answer(keys.rememberedKey);
  }
  if (created) return answer(created.apiKey.key);
  const rotated = await rotateApiKey(deps, application.id, { overlapSeconds: 0, label: 'development' });
  return answer(rotated.apiKey.key);
}
