import { AppError } from '../shared/errors.ts';
import { hashSecret, keyIsUsable, parseApiKey, secretMatches } from './apiKeys.ts';
import { type ApplicationDeps, createApplication, rotateApiKey } from './applications.ts';
import { createTenant } from './tenants.ts';

export const developmentTenantName = 'development';
export const developmentApplicationName = 'development';

/**
 * Makes sure the development tenant, application and API key exist (used by `tdp dev`). `wantedKey` is
 * kept when given (TDP_DEV_API_KEY, or the key remembered from the previous run) and still usable;
 * otherwise a new key is issued.
 */
export async function ensureDevelopmentIdentity(
  deps: ApplicationDeps,
  wantedKey: string | null,
): Promise<{ tenantId: string; applicationId: string; apiKey: string; callbackSecret: string | null }> {
  const tenant =
    (await deps.store.findTenantByName(developmentTenantName)) ??
    (await createTenant(deps, developmentTenantName));
  let application = await deps.store.findApplicationByName(tenant.id, developmentApplicationName);
  let callbackSecret: string | null = null;
  let issuedKey: string | null = null;
  if (!application) {
    const created = await createApplication(deps, { tenantId: tenant.id, name: developmentApplicationName });
    application = created.application;
    callbackSecret = created.callbackSecret;
    issuedKey = created.apiKey.key;
  }

  if (wantedKey) {
    const parsed = parseApiKey(wantedKey);
    if (!parsed) {
      throw new AppError(
        'VALIDATION_FAILED',
        'the development API key must look like tdp_<16 letters or digits>_<43 base64url characters>',
      );
    }
    const existing = await deps.store.findApiKey(parsed.keyId);
    if (
      existing &&
      existing.applicationId === application.id &&
      secretMatches(parsed.secret, existing.secretHash)
    ) {
      if (keyIsUsable(existing, deps.clock.now()))
        return { tenantId: tenant.id, applicationId: application.id, apiKey: wantedKey, callbackSecret };
    } else if (!existing) {
      await deps.store.insertApiKey({
        id: parsed.keyId,
        applicationId: application.id,
        tenantId: tenant.id,
        secretHash: hashSecret(parsed.secret),
        label: 'development',
        createdAt: deps.clock.now(),
        expiresAt: null,
        revokedAt: null,
      });
      return { tenantId: tenant.id, applicationId: application.id, apiKey: wantedKey, callbackSecret };
    }
  }
  if (issuedKey)
    return { tenantId: tenant.id, applicationId: application.id, apiKey: issuedKey, callbackSecret };
  const rotated = await rotateApiKey(deps, application.id, { overlapSeconds: 0, label: 'development' });
  return { tenantId: tenant.id, applicationId: application.id, apiKey: rotated.apiKey.key, callbackSecret };
}
