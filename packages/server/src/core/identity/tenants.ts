import type { OperatorActor } from '../facts/records.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import type { IdentityAuditRecord, IdentityStore, Tenant } from './ports.ts';

type TenantDeps = { store: IdentityStore; clock: Clock; ids: IdGenerator };

/** Creates a tenant; an operator's creation is audited with it. */
export async function createTenant(deps: TenantDeps, name: string, by?: OperatorActor): Promise<Tenant> {
  const tenant: Tenant = { id: deps.ids.newId(), name: name.trim(), createdAt: deps.clock.now() };
  const audit = by && {
    id: deps.ids.newId(),
    action: 'TENANT_CREATED',
    subjectId: tenant.id,
    actor: by,
    reason: '',
    details: { name: tenant.name },
    tenantId: tenant.id,
    createdAt: tenant.createdAt,
  };
  if (!(await deps.store.insertTenant(tenant, audit)))
    throw new AppError('TENANT_NAME_TAKEN', `a tenant named "${tenant.name}" already exists`);
  return tenant;
}

/** The audit action of a change of the tenant's user view. */
export const userViewAction = 'tenant.user_view';

async function requireTenant(deps: TenantDeps, tenantId: string): Promise<Tenant> {
  const tenant = await deps.store.getTenant(tenantId);
  if (!tenant) throw new AppError('TENANT_NOT_FOUND', `tenant ${tenantId} does not exist`);
  return tenant;
}

/** The tenant's applications whose tokens show a user all their tasks of the tenant, and the audit. */
export async function tenantUserView(deps: TenantDeps, tenantId: string) {
  await requireTenant(deps, tenantId);
  const applications = await deps.store.listApplications(tenantId);
  return {
    tenantWideApplicationIds: applications.filter((a) => a.userView === 'TENANT').map((a) => a.id),
    audit: await deps.store.listIdentityAudit(tenantId, userViewAction),
  };
}

/**
 * Names the applications of the tenant whose tokens show a user all their tasks across the tenant; every
 * other application's show only its own (the default). Refused whole if one is not the tenant's; a change
 * is written with its audit record (who, before, after) in one transaction.
 */
export async function setTenantWideApplications(
  deps: TenantDeps,
  tenantId: string,
  requestedIds: string[],
  actor: OperatorActor,
) {
  await requireTenant(deps, tenantId);
  const applicationIds = requestedIds.map((id) => id.toLowerCase());
  const applications = await deps.store.listApplications(tenantId);
  const known = new Set(applications.map((a) => a.id));
  const foreign = applicationIds.findIndex((id) => !known.has(id));
  if (foreign >= 0)
    throw new AppError(
      'VALIDATION_FAILED',
      `application ${applicationIds[foreign]} is not an application of tenant ${tenantId}`,
      [{ path: `/tenantWideApplicationIds/${foreign}`, message: 'not an application of this tenant' }],
    );
  const before = applications.filter((a) => a.userView === 'TENANT').map((a) => a.id);
  const after = [...new Set(applicationIds)].sort();
  if (before.join() !== after.join()) {
    const audit: IdentityAuditRecord = {
      id: deps.ids.newId(),
      tenantId,
      action: userViewAction,
      actor: actor.name,
      before: { tenantWideApplicationIds: before },
      after: { tenantWideApplicationIds: after },
      createdAt: deps.clock.now(),
    };
    // The tenant's own history of the setting, and the operator audit that says who changed it.
    await deps.store.setTenantWideApplications(tenantId, after, audit, {
      id: deps.ids.newId(),
      action: 'USER_VIEW_SET',
      subjectId: tenantId,
      actor,
      reason: '',
      details: {},
      tenantId,
      before: audit.before,
      after: audit.after,
      createdAt: audit.createdAt,
    });
  }
  return tenantUserView(deps, tenantId);
}
