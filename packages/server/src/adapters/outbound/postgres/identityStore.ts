import type { OperatorAuditRecord } from '../../../core/facts/records.ts';
import type {
  ApiKeyRecord,
  Application,
  IdentityAuditRecord,
  IdentityStore,
  Tenant,
  UserView,
} from '../../../core/identity/ports.ts';
import { isUniqueViolation, type Sql, transaction } from './database.ts';
import { insertAudit } from './operatorStore.ts';

interface ApplicationRow {
  id: string;
  tenant_id: string;
  name: string;
  callback_secret_sealed: string;
  previous_callback_secret_sealed: string | null;
  previous_callback_secret_expires_at: Date | null;
  resource_provider_url: string | null;
  resource_provider_token_sealed: string | null;
  user_view: UserView;
  created_at: Date;
  updated_at: Date;
}

interface ApiKeyRow {
  id: string;
  application_id: string;
  tenant_id: string;
  secret_hash: Buffer;
  label: string | null;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  user_view: UserView;
}

const toApplication = (row: ApplicationRow): Application => ({
  id: row.id,
  tenantId: row.tenant_id,
  name: row.name,
  callbackSecretSealed: row.callback_secret_sealed,
  previousCallbackSecretSealed: row.previous_callback_secret_sealed,
  previousCallbackSecretExpiresAt: row.previous_callback_secret_expires_at,
  resourceProviderUrl: row.resource_provider_url,
  resourceProviderTokenSealed: row.resource_provider_token_sealed,
  userView: row.user_view,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

const toApiKey = (row: ApiKeyRow): ApiKeyRecord => ({
  id: row.id,
  applicationId: row.application_id,
  tenantId: row.tenant_id,
  secretHash: row.secret_hash,
  label: row.label,
  createdAt: row.created_at,
  expiresAt: row.expires_at,
  revokedAt: row.revoked_at,
  userView: row.user_view,
});

export class PostgresIdentityStore implements IdentityStore {
  constructor(private readonly sql: Sql) {}

  async insertTenant(tenant: Tenant, audit?: OperatorAuditRecord): Promise<boolean> {
    try {
      await transaction(this.sql, async (tx) => {
        await tx`INSERT INTO tenant (id, name, created_at) VALUES (${tenant.id}, ${tenant.name}, ${tenant.createdAt})`;
        if (audit) await insertAudit(tx, audit);
      });
      return true;
    } catch (error) {
      if (isUniqueViolation(error, 'tenant_name_key')) return false;
      throw error;
    }
  }

  async listTenants(): Promise<Tenant[]> {
    const rows = await this.sql<{ id: string; name: string; created_at: Date }[]>`
      SELECT id, name, created_at FROM tenant ORDER BY id`;
    return rows.map((r) => ({ id: r.id, name: r.name, createdAt: r.created_at }));
  }

  async getTenant(id: string): Promise<Tenant | null> {
    const [row] = await this.sql<{ id: string; name: string; created_at: Date }[]>`
      SELECT id, name, created_at FROM tenant WHERE id = ${id}`;
    return row ? { id: row.id, name: row.name, createdAt: row.created_at } : null;
  }

  async findTenantByName(name: string): Promise<Tenant | null> {
    const [row] = await this.sql<{ id: string; name: string; created_at: Date }[]>`
      SELECT id, name, created_at FROM tenant WHERE name = ${name}`;
    return row ? { id: row.id, name: row.name, createdAt: row.created_at } : null;
  }

  async findApplicationByName(tenantId: string, name: string): Promise<Application | null> {
    const [row] = await this.sql<ApplicationRow[]>`
      SELECT * FROM application WHERE tenant_id = ${tenantId} AND name = ${name}`;
    return row ? toApplication(row) : null;
  }

  async insertApiKey(key: ApiKeyRecord): Promise<boolean> {
    const rows = await this.sql`
      INSERT INTO api_key (id, application_id, secret_hash, label, created_at, expires_at)
      VALUES (${key.id}, ${key.applicationId}, ${key.secretHash}, ${key.label}, ${key.createdAt}, ${key.expiresAt})
      ON CONFLICT (id) DO NOTHING RETURNING id`;
    return rows.length > 0;
  }

  async insertApplication(
    application: Application,
    firstKey: ApiKeyRecord,
    audit?: OperatorAuditRecord,
  ): Promise<boolean> {
    try {
      await transaction(this.sql, async (tx) => {
        await tx`
          INSERT INTO application (id, tenant_id, name, callback_secret_sealed, resource_provider_url,
                                   resource_provider_token_sealed, created_at, updated_at)
          VALUES (${application.id}, ${application.tenantId}, ${application.name}, ${application.callbackSecretSealed},
                  ${application.resourceProviderUrl}, ${application.resourceProviderTokenSealed},
                  ${application.createdAt}, ${application.updatedAt})`;
        await tx`
          INSERT INTO api_key (id, application_id, secret_hash, label, created_at)
          VALUES (${firstKey.id}, ${application.id}, ${firstKey.secretHash}, ${firstKey.label}, ${firstKey.createdAt})`;
        if (audit) await insertAudit(tx, audit);
      });
      return true;
    } catch (error) {
      if (isUniqueViolation(error, 'application_tenant_id_name_key')) return false;
      throw error;
    }
  }

  async getApplication(id: string): Promise<Application | null> {
    const [row] = await this.sql<ApplicationRow[]>`SELECT * FROM application WHERE id = ${id}`;
    return row ? toApplication(row) : null;
  }

  async listApplications(tenantId: string): Promise<Application[]> {
    const rows = await this.sql<
      ApplicationRow[]
    >`SELECT * FROM application WHERE tenant_id = ${tenantId} ORDER BY id`;
    return rows.map(toApplication);
  }

  async updateApplication(application: Application, audit?: OperatorAuditRecord): Promise<void> {
    await transaction(this.sql, async (tx) => {
      await tx`
      UPDATE application SET
        name = ${application.name},
        callback_secret_sealed = ${application.callbackSecretSealed},
        previous_callback_secret_sealed = ${application.previousCallbackSecretSealed},
        previous_callback_secret_expires_at = ${application.previousCallbackSecretExpiresAt},
        resource_provider_url = ${application.resourceProviderUrl},
        resource_provider_token_sealed = ${application.resourceProviderTokenSealed},
        updated_at = ${application.updatedAt}
      WHERE id = ${application.id}`;
      if (audit) await insertAudit(tx, audit);
    });
  }

  async rotateApiKey(key: ApiKeyRecord, othersExpireAt: Date, audit?: OperatorAuditRecord): Promise<void> {
    await transaction(this.sql, async (tx) => {
      await tx`
        UPDATE api_key SET expires_at = ${othersExpireAt}
        WHERE application_id = ${key.applicationId} AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > ${othersExpireAt})`;
      await tx`
        INSERT INTO api_key (id, application_id, secret_hash, label, created_at)
        VALUES (${key.id}, ${key.applicationId}, ${key.secretHash}, ${key.label}, ${key.createdAt})`;
      if (audit) await insertAudit(tx, audit);
    });
  }

  async revokeApiKey(
    applicationId: string,
    keyId: string,
    at: Date,
    audit?: OperatorAuditRecord,
  ): Promise<boolean> {
    return transaction(this.sql, async (tx) => {
      const rows = await tx`
        UPDATE api_key SET revoked_at = coalesce(revoked_at, ${at})
        WHERE id = ${keyId} AND application_id = ${applicationId} RETURNING id`;
      if (rows.length > 0 && audit) await insertAudit(tx, audit);
      return rows.length > 0;
    });
  }

  async findApiKey(keyId: string): Promise<ApiKeyRecord | null> {
    const [row] = await this.sql<ApiKeyRow[]>`
      SELECT k.*, a.tenant_id, a.user_view FROM api_key k JOIN application a ON a.id = k.application_id WHERE k.id = ${keyId}`;
    return row ? toApiKey(row) : null;
  }

  async listApiKeys(applicationId: string): Promise<ApiKeyRecord[]> {
    const rows = await this.sql<ApiKeyRow[]>`
      SELECT k.*, a.tenant_id, a.user_view FROM api_key k JOIN application a ON a.id = k.application_id
      WHERE k.application_id = ${applicationId} ORDER BY k.created_at`;
    return rows.map(toApiKey);
  }

  async setTenantWideApplications(
    tenantId: string,
    applicationIds: string[],
    audit: IdentityAuditRecord,
    operatorAudit: OperatorAuditRecord,
  ): Promise<void> {
    await transaction(this.sql, async (tx) => {
      await tx`
        UPDATE application
        SET user_view = CASE WHEN id = ANY(${applicationIds}::uuid[]) THEN 'TENANT' ELSE 'APPLICATION' END
        WHERE tenant_id = ${tenantId}`;
      await tx`
        INSERT INTO identity_audit (id, tenant_id, action, actor, before, after, created_at)
        VALUES (${audit.id}, ${audit.tenantId}, ${audit.action}, ${audit.actor}, ${tx.json(audit.before as never)},
                ${tx.json(audit.after as never)}, ${audit.createdAt})`;
      await insertAudit(tx, operatorAudit);
    });
  }

  async listIdentityAudit(tenantId: string, action: string): Promise<IdentityAuditRecord[]> {
    const rows = await this.sql<
      {
        id: string;
        tenant_id: string;
        action: string;
        actor: string;
        before: unknown;
        after: unknown;
        created_at: Date;
      }[]
    >`
      SELECT id, tenant_id, action, actor, before, after, created_at FROM identity_audit
      WHERE tenant_id = ${tenantId} AND action = ${action}
      ORDER BY created_at, id`;
    return rows.map((r) => ({
      id: r.id,
      tenantId: r.tenant_id,
      action: r.action,
      actor: r.actor,
      before: r.before,
      after: r.after,
      createdAt: r.created_at,
    }));
  }
}
