import { randomBytes } from 'node:crypto';
import type { OperatorActor, OperatorAuditRecord } from '../facts/records.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import { generateApiKey } from './apiKeys.ts';
import { checkOutboundUrl, type LiteralEgressCheck, refuseLiteralEgress } from './outboundUrl.ts';
import type { ApiKeyRecord, Application, IdentityStore } from './ports.ts';
import type { SecretBox } from './secretBox.ts';

export interface ApplicationDeps {
  store: IdentityStore;
  secrets: SecretBox;
  clock: Clock;
  ids: IdGenerator;
  /** Allows http:// resource-provider URLs (development only). */
  allowInsecureUrls: boolean;
  /** The egress policy, for refusing a provider URL on a refused address at once; absent: none at input. */
  egress?: LiteralEgressCheck;
}

export interface ResourceProviderSettings {
  url: string;
  bearerToken: string;
}

/** A freshly issued key: the plaintext is returned here once and never stored. */
export interface IssuedApiKey {
  id: string;
  key: string;
  createdAt: Date;
}

const sealedField = (applicationId: string, field: string) => `application:${applicationId}:${field}`;

/** In Standard Webhooks' form (base64, not base64url), so a receiver hands it to `new Webhook(secret)`. */
export function newCallbackSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function sealResourceProvider(
  deps: ApplicationDeps,
  applicationId: string,
  settings: ResourceProviderSettings,
) {
  const problem = checkOutboundUrl(settings.url, deps.allowInsecureUrls);
  if (problem) {
    throw new AppError('VALIDATION_FAILED', `resourceProvider.url ${problem}`, [
      { path: '/resourceProvider/url', message: problem },
    ]);
  }
  refuseLiteralEgress(deps.egress, settings.url, '/resourceProvider/url');
  return {
    resourceProviderUrl: settings.url,
    resourceProviderTokenSealed: deps.secrets.seal(
      settings.bearerToken,
      sealedField(applicationId, 'resource_provider_token'),
    ),
  };
}

function newKeyRecord(application: Application, label: string | null, now: Date) {
  const generated = generateApiKey();
  const record: ApiKeyRecord = {
    id: generated.keyId,
    applicationId: application.id,
    tenantId: application.tenantId,
    secretHash: generated.secretHash,
    label,
    createdAt: now,
    expiresAt: null,
    revokedAt: null,
    userView: application.userView,
  };
  const issued: IssuedApiKey = { id: generated.keyId, key: generated.plaintext, createdAt: now };
  return { record, issued };
}

/**
 * The audit record of an operator's change to an application (none for TDP's own, e.g. `tdp dev`'s
 * set-up), written by the store in the change's transaction.
 */
function auditOf(
  deps: Pick<ApplicationDeps, 'ids'>,
  by: OperatorActor | undefined,
  action: string,
  application: Application,
  at: Date,
  details: Record<string, unknown> = {},
): OperatorAuditRecord | undefined {
  if (!by) return undefined;
  return {
    id: deps.ids.newId(),
    action,
    subjectId: application.id,
    actor: by,
    // The admin API takes no reason for these: the action and its details say what happened.
    reason: '',
    details,
    tenantId: application.tenantId,
    createdAt: at,
  };
}

export async function createApplication(
  deps: ApplicationDeps,
  input: {
    tenantId: string;
    name: string;
    resourceProvider?: ResourceProviderSettings;
    callbackSecret?: string;
  },
  by?: OperatorActor,
): Promise<{ application: Application; apiKey: IssuedApiKey; callbackSecret: string }> {
  const tenant = await deps.store.getTenant(input.tenantId);
  if (!tenant) throw new AppError('TENANT_NOT_FOUND', `tenant ${input.tenantId} does not exist`);
  const now = deps.clock.now();
  const id = deps.ids.newId();
  const callbackSecret = input.callbackSecret ?? newCallbackSecret();
  const application: Application = {
    id,
    tenantId: tenant.id,
    name: input.name.trim(),
    callbackSecretSealed: deps.secrets.seal(callbackSecret, sealedField(id, 'callback_secret')),
    previousCallbackSecretSealed: null,
    previousCallbackSecretExpiresAt: null,
    resourceProviderUrl: null,
    resourceProviderTokenSealed: null,
    userView: 'APPLICATION',
    createdAt: now,
    updatedAt: now,
    ...(input.resourceProvider ? sealResourceProvider(deps, id, input.resourceProvider) : {}),
  };
  const { record, issued } = newKeyRecord(application, 'initial', now);
  const audit = auditOf(deps, by, 'APPLICATION_CREATED', application, now, { name: application.name });
  if (!(await deps.store.insertApplication(application, record, audit))) {
    throw new AppError(
      'APPLICATION_NAME_TAKEN',
      `tenant ${tenant.id} already has an application named "${application.name}"`,
    );
  }
  return { application, apiKey: issued, callbackSecret };
}

async function requireApplication(deps: Pick<ApplicationDeps, 'store'>, id: string): Promise<Application> {
  const application = await deps.store.getApplication(id);
  if (!application) throw new AppError('APPLICATION_NOT_FOUND', `application ${id} does not exist`);
  return application;
}

export async function updateResourceProvider(
  deps: ApplicationDeps,
  applicationId: string,
  settings: ResourceProviderSettings | null,
  by?: OperatorActor,
): Promise<Application> {
  const application = await requireApplication(deps, applicationId);
  const updated: Application = {
    ...application,
    ...(settings
      ? sealResourceProvider(deps, application.id, settings)
      : { resourceProviderUrl: null, resourceProviderTokenSealed: null }),
    updatedAt: deps.clock.now(),
  };
  await deps.store.updateApplication(
    updated,
    auditOf(deps, by, 'RESOURCE_PROVIDER_SET', updated, updated.updatedAt, {
      url: updated.resourceProviderUrl,
    }),
  );
  return updated;
}

/**
 * Issues a new API key. Keys issued before keep working for `overlapSeconds` so callers can roll the
 * new key out; after that only the new key is accepted.
 */
export async function rotateApiKey(
  deps: ApplicationDeps,
  applicationId: string,
  options: { overlapSeconds: number; label: string | null },
  by?: OperatorActor,
): Promise<{ apiKey: IssuedApiKey; previousKeysExpireAt: Date }> {
  const application = await requireApplication(deps, applicationId);
  const now = deps.clock.now();
  const { record, issued } = newKeyRecord(application, options.label, now);
  const previousKeysExpireAt = new Date(now.getTime() + options.overlapSeconds * 1000);
  await deps.store.rotateApiKey(
    record,
    previousKeysExpireAt,
    auditOf(deps, by, 'API_KEY_ROTATED', application, now, {
      keyId: record.id,
      previousKeysExpireAt: previousKeysExpireAt.toISOString(),
    }),
  );
  return { apiKey: issued, previousKeysExpireAt };
}

export async function revokeApiKey(
  deps: ApplicationDeps,
  applicationId: string,
  keyId: string,
  by?: OperatorActor,
): Promise<void> {
  const application = await requireApplication(deps, applicationId);
  const now = deps.clock.now();
  const audit = auditOf(deps, by, 'API_KEY_REVOKED', application, now, { keyId });
  if (!(await deps.store.revokeApiKey(applicationId, keyId, now, audit))) {
    throw new AppError('API_KEY_NOT_FOUND', `application ${applicationId} has no API key ${keyId}`);
  }
}

/** A new signing secret; the previous one stays valid for signatures during the overlap. */
export async function rotateCallbackSecret(
  deps: ApplicationDeps,
  applicationId: string,
  overlapSeconds: number,
  by?: OperatorActor,
): Promise<{ callbackSecret: string; previousSecretExpiresAt: Date }> {
  const application = await requireApplication(deps, applicationId);
  const now = deps.clock.now();
  const callbackSecret = newCallbackSecret();
  const previousSecretExpiresAt = new Date(now.getTime() + overlapSeconds * 1000);
  await deps.store.updateApplication(
    {
      ...application,
      callbackSecretSealed: deps.secrets.seal(callbackSecret, sealedField(application.id, 'callback_secret')),
      previousCallbackSecretSealed: application.callbackSecretSealed,
      previousCallbackSecretExpiresAt: previousSecretExpiresAt,
      updatedAt: now,
    },
    auditOf(deps, by, 'CALLBACK_SECRET_ROTATED', application, now, {
      previousSecretExpiresAt: previousSecretExpiresAt.toISOString(),
    }),
  );
  return { callbackSecret, previousSecretExpiresAt };
}

/** The decrypted secrets of an application, for the components that sign or call on its behalf. */
export function openApplicationSecrets(secrets: SecretBox, application: Application) {
  return {
    callbackSecret: secrets.open(
      application.callbackSecretSealed,
      sealedField(application.id, 'callback_secret'),
    ),
    resourceProviderToken: application.resourceProviderTokenSealed
      ? secrets.open(
          application.resourceProviderTokenSealed,
          sealedField(application.id, 'resource_provider_token'),
        )
      : null,
  };
}
