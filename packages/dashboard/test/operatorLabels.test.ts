/**
 * What the dashboard says about operators, without a browser: the header's role ("admin", "operator
 * for 2 tenants") and the audit's one-line change.
 */
import { describe, expect, it } from 'vitest';
import { compactChange, roleSummary } from '../src/labels.ts';

const tenantA = '0192f3a1-0000-7000-8000-00000000000a';
const tenantB = '0192f3a1-0000-7000-8000-00000000000b';

describe('the header names the highest role and where it holds', () => {
  it.each([
    [[{ role: 'admin', tenantId: null }], 'admin'],
    [[{ role: 'viewer', tenantId: null }], 'viewer'],
    [
      [
        { role: 'operator', tenantId: tenantA },
        { role: 'operator', tenantId: tenantB },
        { role: 'viewer', tenantId: null },
      ],
      'operator for 2 tenants',
    ],
    [[{ role: 'admin', tenantId: tenantA }], 'admin for 1 tenant'],
    // Platform-wide beats a tenant's binding of the same role.
    [
      [
        { role: 'operator', tenantId: tenantA },
        { role: 'operator', tenantId: null },
      ],
      'operator',
    ],
    [[], 'no role'],
  ] as const)('%j → %s', (roles, expected) => {
    expect(roleSummary([...roles])).toBe(expected);
  });
});

describe("the audit's before → after", () => {
  it('names only the fields that changed', () => {
    expect(compactChange({ status: 'ACTIVE', email: 'a@x' }, { status: 'DISABLED', email: 'a@x' })).toBe(
      'status: ACTIVE → DISABLED',
    );
    expect(compactChange({ roles: [] }, { roles: [{ role: 'viewer' }], hasPassword: true })).toBe(
      'roles: [] → [{"role":"viewer"}]; hasPassword: — → true',
    );
    expect(compactChange({ a: 1 }, { a: 1 })).toBe('no change');
  });

  it('shows a missing side as a dash, and keeps a long value short', () => {
    expect(compactChange(null, undefined)).toBe('—');
    expect(compactChange(null, { status: 'ACTIVE', roles: [{ role: 'viewer' }] })).toBe(
      '— → status: ACTIVE; roles: [{"role":"viewer"}]',
    );
    expect(compactChange({ name: 'nightly' }, null)).toBe('name: nightly → —');
    expect(compactChange(null, 'DRAINING')).toBe('— → DRAINING');
    expect(compactChange('x'.repeat(100), 'y')).toBe(`${'x'.repeat(59)}… → y`);
  });
});
