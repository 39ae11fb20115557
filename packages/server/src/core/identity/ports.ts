/**
 * Identity glossary
 * - tenant: an organisation; the outermost isolation boundary.
 * - application: a business system inside a tenant; it owns API keys, a callback signing secret and a
 *   resource provider (URL + bearer token) through which workers get access to its files.
 * - API key: `tdp_<keyId>_<secret>`; stored as a hash; several may be valid during a rotation overlap.
 * - principal: who is calling, as established by authentication.
 * - user view: what the tokens an application mints show a user. `APPLICATION` (the default): that
 *   application's tasks only. `TENANT`: the user's tasks in every application of the tenant, when the
 *   tenant names the application so (an audited setting). Reads by API key stay per application.
 */
import type { OperatorAuditRecord } from '../facts/records.ts';

export type UserView = 'APPLICATION' | 'TENANT';

export interface Tenant {
  id: string;
  name: string;
  createdAt: Date;
}

export interface Application {
  id: string;
  tenantId: string;
  name: string;
  callbackSecretSealed: string;
  previousCallbackSecretSealed: string | null;
  previousCallbackSecretExpiresAt: Date | null;
  resourceProviderUrl: string | null;
  resourceProviderTokenSealed: string | null;
  userView: UserView;
  createdAt: Date;
  updatedAt: Date;
}

export interface ApiKeyRecord {
  id: string;
  applicationId: string;
  tenantId: string;
  secretHash: Buffer;
  label: string | null;
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
  /** The user view of the key's application. */
  userView: UserView;
}

export interface ApplicationPrincipal {
  kind: 'application';
  tenantId: string;
  applicationId: string;
  keyId: string;
  /** What the tokens this application mints show a user. */
  userView: UserView;
}

/** One audited change of an identity setting. */
export interface IdentityAuditRecord {
  id: string;
  tenantId: string;
  action: string;
  actor: string;
  before: unknown;
  after: unknown;
  createdAt: Date;
}

export interface IdentityStore {
  /** False when the name is taken. */
  /** Each change below writes its audit record, when given, in the same transaction. */
  insertTenant(tenant: Tenant, audit?: OperatorAuditRecord): Promise<boolean>;
  listTenants(): Promise<Tenant[]>;
  getTenant(id: string): Promise<Tenant | null>;
  findTenantByName(name: string): Promise<Tenant | null>;
  /** Inserts the application and its first key atomically; false when the name is taken in the tenant. */
  insertApplication(
    application: Application,
    firstKey: ApiKeyRecord,
    audit?: OperatorAuditRecord,
  ): Promise<boolean>;
  getApplication(id: string): Promise<Application | null>;
  findApplicationByName(tenantId: string, name: string): Promise<Application | null>;
  listApplications(tenantId: string): Promise<Application[]>;
  updateApplication(application: Application, audit?: OperatorAuditRecord): Promise<void>;
  /** Adds a key; every other live key of the application then expires at `othersExpireAt` at the latest. */
  rotateApiKey(key: ApiKeyRecord, othersExpireAt: Date, audit?: OperatorAuditRecord): Promise<void>;
  /** Adds a key without touching the others; false when the key id exists already. */
  insertApiKey(key: ApiKeyRecord): Promise<boolean>;
  revokeApiKey(applicationId: string, keyId: string, at: Date, audit?: OperatorAuditRecord): Promise<boolean>;
  findApiKey(keyId: string): Promise<ApiKeyRecord | null>;
  listApiKeys(applicationId: string): Promise<ApiKeyRecord[]>;
  /**
   * Gives exactly the named applications of the tenant the TENANT user view (the others APPLICATION)
   * and writes the audit record, in one transaction.
   */
  setTenantWideApplications(
    tenantId: string,
    applicationIds: string[],
    audit: IdentityAuditRecord,
    operatorAudit: OperatorAuditRecord,
  ): Promise<void>;
  listIdentityAudit(tenantId: string, action: string): Promise<IdentityAuditRecord[]>;
}

/**
 * A credential or a view taken away. Announced by the replica that made the change and heard by every
 * replica at once (its caches forget the credential; its streams and realtime subscriptions end).
 */
export type Revocation =
  | { kind: 'apiKey'; keyId: string }
  | { kind: 'workerKey'; keyId: string }
  /** An operator disabled, signed out, or given other roles: their live feed ends (its token said more). */
  | { kind: 'operator'; operatorId: string }
  | {
      kind: 'taskAccess';
      tenantId: string;
      applicationId: string;
      taskId: string;
      principalType: 'USER' | 'PROJECT' | 'ROLE';
      principalId: string;
    };

export interface Revocations {
  /** Applies the revocation in this process, then tells the other replicas. */
  announce(revocation: Revocation): Promise<void>;
  /**
   * Calls `listener` for every revocation, this replica's (`here`: true) and the others'. Work that
   * reaches every replica by itself (Centrifugo's server API, the gateway's engine) is done `here` only.
   */
  subscribe(listener: (revocation: Revocation, here: boolean) => void): void;
}
