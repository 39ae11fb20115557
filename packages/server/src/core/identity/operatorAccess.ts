/**
 * Who an operator is and what they may do (pure). A role is bound platform-wide or to one tenant; each
 * role includes the ones before it: a `viewer` reads, an `operator` also acts on tasks (and, bound
 * platform-wide, on workers, nodes and dead letters), an `admin` also manages tenants, applications and
 * keys (bound platform-wide: operators and worker credentials too). A personal token caps its operator's
 * roles at the token's own.
 */
import type { OperatorActor } from '../facts/records.ts';

export const operatorRoles = ['viewer', 'operator', 'admin'] as const;
export type OperatorRole = (typeof operatorRoles)[number];

export interface RoleBinding {
  role: OperatorRole;
  /** Null: every tenant, and the platform's own resources. */
  tenantId: string | null;
}

export interface OperatorPrincipal {
  /** Null: the bootstrap admin token, which names nobody. */
  operatorId: string | null;
  displayName: string;
  email: string | null;
  bindings: RoleBinding[];
  /**
   * How the request authenticated; the id is the session's or token's public id, and a token's expiry
   * is when it stops (a token it issues ends no later).
   */
  credential: { kind: 'session' | 'token' | 'bootstrap'; id: string | null; expiresAt?: Date };
}

/** What a request is about: the platform's own resources, or one tenant's. */
export type AccessScope = 'platform' | { tenantId: string };

export const isOperatorRole = (value: unknown): value is OperatorRole =>
  typeof value === 'string' && (operatorRoles as readonly string[]).includes(value);

const rank = (role: OperatorRole) => operatorRoles.indexOf(role);
export const roleAtLeast = (role: OperatorRole, least: OperatorRole) => rank(role) >= rank(least);
export const lowerRole = (a: OperatorRole, b: OperatorRole): OperatorRole => (rank(a) <= rank(b) ? a : b);

/** The bootstrap admin token as a principal: a platform-wide admin with no name of its own. */
export const bootstrapPrincipal: OperatorPrincipal = {
  operatorId: null,
  displayName: 'bootstrap admin token',
  email: null,
  bindings: [{ role: 'admin', tenantId: null }],
  credential: { kind: 'bootstrap', id: null },
};

/** Whether the principal holds at least `least` for the scope (a platform-wide binding covers every tenant). */
export function allows(principal: OperatorPrincipal, least: OperatorRole, scope: AccessScope): boolean {
  return principal.bindings.some(
    (b) =>
      roleAtLeast(b.role, least) &&
      (b.tenantId === null || (scope !== 'platform' && b.tenantId === scope.tenantId)),
  );
}

/** Whether the principal holds at least `least` anywhere (some tenant, or platform-wide). */
export const holdsSomewhere = (principal: OperatorPrincipal, least: OperatorRole) =>
  principal.bindings.some((b) => roleAtLeast(b.role, least));

/** The tenants where the principal holds at least `least`: all of them, or the ones named. */
export function tenantReach(principal: OperatorPrincipal, least: OperatorRole): 'all' | string[] {
  const held = principal.bindings.filter((b) => roleAtLeast(b.role, least));
  if (held.some((b) => b.tenantId === null)) return 'all';
  return [...new Set(held.map((b) => b.tenantId as string))];
}

/** The bindings a token may use: its operator's, each capped at the token's role. */
export const cappedBindings = (bindings: RoleBinding[], cap: OperatorRole): RoleBinding[] =>
  bindings.map((b) => ({ ...b, role: lowerRole(b.role, cap) }));

/** The highest role the principal holds anywhere (null: none). */
export function highestRole(principal: Pick<OperatorPrincipal, 'bindings'>): OperatorRole | null {
  let best: OperatorRole | null = null;
  for (const b of principal.bindings) if (!best || rank(b.role) > rank(best)) best = b.role;
  return best;
}

/** Who the audit and the timeline say acted. */
export const actorOf = (principal: OperatorPrincipal): OperatorActor => ({
  operatorId: principal.operatorId,
  name: principal.displayName,
  credentialId: principal.credential.id,
});
