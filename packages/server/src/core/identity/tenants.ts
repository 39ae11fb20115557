import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import type { IdentityStore, Tenant } from './ports.ts';

export async function createTenant(
  deps: { store: IdentityStore; clock: Clock; ids: IdGenerator },
  name: string,
): Promise<Tenant> {
  const tenant: Tenant = { id: deps.ids.newId(), name: name.trim(), createdAt: deps.clock.now() };
  if (!(await deps.store.insertTenant(tenant)))
    throw new AppError('TENANT_NAME_TAKEN', `a tenant named "${tenant.name}" already exists`);
  return tenant;
}
