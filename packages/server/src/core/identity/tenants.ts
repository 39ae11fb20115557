import type { Clock, IdGenerator } from '../shared/ports.ts';
import type { IdentityStore, Tenant } from './ports.ts';

export async function createTenant(
  deps: { store: IdentityStore; clock: Clock; ids: IdGenerator },
  name: string,
): Promise<Tenant> {
  const tenant: Tenant = { id: deps.ids.newId(), name: name.trim(), createdAt: deps.clock.now() };
  await deps.store.insertTenant(tenant);
  return tenant;
}
