/**
 * Which roles a person signed in through single sign-on gets, from their provider groups (pure). The map
 * is the `TDP_OIDC_ROLE_MAP` setting: `{ "<group>": "admin" | { "role": "operator", "tenants": [ids] } }`.
 * A role given as a string, or without `tenants`, is platform-wide; with `tenants`, it is bound to each
 * named tenant. A group the map does not name grants nothing, so a person in no mapped group gets no role.
 */
import { isUuid } from '@tdp/protocol';
import { isOperatorRole, operatorRoles, type RoleBinding } from './operatorAccess.ts';

/** Each group's role bindings. A Map: a group may be named anything, `__proto__` included. */
export type SsoRoleMap = ReadonlyMap<string, readonly RoleBinding[]>;

/** A map that does not parse, naming the entry at fault. */
export class SsoRoleMapError extends Error {}

const roleList = operatorRoles.join(', ');

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Parses and checks the map's JSON text; throws SsoRoleMapError naming the first bad entry. */
export function parseSsoRoleMap(text: string): SsoRoleMap {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new SsoRoleMapError('it is not valid JSON');
  }
  if (!isPlainObject(parsed)) throw new SsoRoleMapError('it must be a JSON object mapping a group to a role');
  const map = new Map<string, RoleBinding[]>();
  for (const [group, entry] of Object.entries(parsed)) {
    if (group.trim() === '') throw new SsoRoleMapError('a group name is empty');
    map.set(group, bindingsOf(group, entry));
  }
  return map;
}

function bindingsOf(group: string, entry: unknown): RoleBinding[] {
  const bad = (why: string) => new SsoRoleMapError(`group ${JSON.stringify(group)}: ${why}`);
  if (typeof entry === 'string') {
    if (!isOperatorRole(entry))
      throw bad(`the role must be one of ${roleList}, not ${JSON.stringify(entry)}`);
    return [{ role: entry, tenantId: null }];
  }
  if (!isPlainObject(entry))
    throw bad('give a role ("admin") or an object ({ "role": "operator", "tenants": ["<tenant id>"] })');
  const unknown = Object.keys(entry).filter((key) => key !== 'role' && key !== 'tenants');
  if (unknown.length > 0) throw bad(`unknown field ${JSON.stringify(unknown[0])} (only role and tenants)`);
  const { role, tenants } = entry;
  if (!isOperatorRole(role)) throw bad(`the role must be one of ${roleList}, not ${JSON.stringify(role)}`);
  if (tenants === undefined) return [{ role, tenantId: null }];
  // An empty list is refused rather than read as "every tenant": leaving the field out says that.
  if (!Array.isArray(tenants) || tenants.length === 0)
    throw bad('tenants must be a non-empty list of tenant ids (leave it out for every tenant)');
  const ids = new Set<string>();
  for (const tenant of tenants) {
    if (typeof tenant !== 'string' || !isUuid(tenant))
      throw bad(`tenant ${JSON.stringify(tenant)} is not a tenant id (a UUID)`);
    ids.add(tenant.toLowerCase());
  }
  return [...ids].map((tenantId) => ({ role, tenantId }));
}

/** The role bindings the groups earn, each once (in the order of the groups); none when no group is mapped. */
export function rolesForGroups(map: SsoRoleMap, groups: readonly string[]): RoleBinding[] {
  const earned = new Map<string, RoleBinding>();
  for (const group of new Set(groups))
    for (const binding of map.get(group) ?? [])
      earned.set(`${binding.role} ${binding.tenantId ?? '*'}`, { ...binding });
  return [...earned.values()];
}
