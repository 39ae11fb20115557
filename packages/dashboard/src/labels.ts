/**
 * What the pages say about operators, as plain functions: the header's role and the audit's one-line
 * change.
 */
import { type OperatorRole, operatorRoles, type RoleBinding } from './api.ts';

/**
 * The highest role held, and where: `admin` (platform-wide), `operator for 2 tenants`.
 * A lower platform-wide role beside it is not mentioned: the header names the most one can do.
 */
export function roleSummary(roles: RoleBinding[]): string {
  if (roles.length === 0) return 'no role';
  const highest = roles.reduce(
    (best, b) => (operatorRoles.indexOf(b.role) > operatorRoles.indexOf(best) ? b.role : best),
    'viewer' as OperatorRole,
  );
  const held = roles.filter((b) => b.role === highest);
  if (held.some((b) => b.tenantId === null)) return highest;
  const tenants = new Set(held.map((b) => b.tenantId)).size;
  return `${highest} for ${tenants} ${tenants === 1 ? 'tenant' : 'tenants'}`;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** A value in a line: strings as they are, the rest as JSON, cut short. */
function short(value: unknown): string {
  if (value === undefined || value === null) return '—';
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

/** An object's fields in a line: `email: ada@example.test; role: admin`. */
const fieldsOf = (record: Record<string, unknown>) =>
  Object.entries(record)
    .map(([field, value]) => `${field}: ${short(value)}`)
    .join('; ');

const missing = (value: unknown) => value === null || value === undefined;

/**
 * What changed, in one line: `status: ACTIVE → DISABLED`, only the fields that differ; a thing created
 * or removed shows its fields on its side (`— → email: ada@example.test; …`).
 */
export function compactChange(before: unknown, after: unknown): string {
  if (missing(before) && missing(after)) return '—';
  if (missing(before) && isRecord(after)) return `— → ${fieldsOf(after)}`;
  if (isRecord(before) && missing(after)) return `${fieldsOf(before)} → —`;
  if (isRecord(before) && isRecord(after)) {
    const fields = [...new Set([...Object.keys(before), ...Object.keys(after)])].filter(
      (field) => JSON.stringify(before[field]) !== JSON.stringify(after[field]),
    );
    if (fields.length === 0) return 'no change';
    return fields.map((field) => `${field}: ${short(before[field])} → ${short(after[field])}`).join('; ');
  }
  return `${short(before)} → ${short(after)}`;
}
