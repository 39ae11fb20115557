/** The single sign-on role map (TDP_OIDC_ROLE_MAP) and the SSO settings: what parses, what stops the start. */
import { describe, expect, it } from 'vitest';
import { parseSsoRoleMap, rolesForGroups } from '../src/core/identity/ssoRoles.ts';
import { oidcSignInSettings, ssoSettings } from '../src/features/dashboard/ssoSettings.ts';
import { ConfigError, readConfiguration } from '../src/host/settings.ts';

const tenantA = '0190a4e2-1111-7000-8000-00000000000a';
const tenantB = '0190a4e2-2222-7000-8000-00000000000b';

describe('the SSO role map', () => {
  it('reads a string as a platform-wide role and tenants as one binding per tenant', () => {
    const map = parseSsoRoleMap(
      JSON.stringify({
        'tdp-admins': 'admin',
        'tdp-viewers': { role: 'viewer' },
        'support-a': { role: 'operator', tenants: [tenantA, tenantB.toUpperCase()] },
      }),
    );
    expect(map.get('tdp-admins')).toEqual([{ role: 'admin', tenantId: null }]);
    expect(map.get('tdp-viewers')).toEqual([{ role: 'viewer', tenantId: null }]);
    // Tenant ids are kept lower-case, as the database has them.
    expect(map.get('support-a')).toEqual([
      { role: 'operator', tenantId: tenantA },
      { role: 'operator', tenantId: tenantB },
    ]);
  });

  it.each([
    ['not JSON', '{admin', 'it is not valid JSON'],
    ['an array', '["admin"]', 'it must be a JSON object'],
    [
      'an unknown role',
      '{"ops":"root"}',
      'group "ops": the role must be one of viewer, operator, admin, not "root"',
    ],
    ['an object without a role', '{"ops":{"tenants":[]}}', 'group "ops": the role must be one of'],
    ['an unknown field', '{"ops":{"role":"viewer","tenant":"x"}}', 'group "ops": unknown field "tenant"'],
    [
      'an empty tenant list',
      '{"ops":{"role":"viewer","tenants":[]}}',
      'group "ops": tenants must be a non-empty list',
    ],
    [
      'a tenant that is no UUID',
      '{"ops":{"role":"viewer","tenants":["acme"]}}',
      'group "ops": tenant "acme" is not a tenant id',
    ],
    ['a number for a role', '{"ops":3}', 'group "ops": give a role'],
    ['an empty group name', '{" ":"admin"}', 'a group name is empty'],
  ])('refuses %s, naming the entry', (_what, text, message) => {
    expect(() => parseSsoRoleMap(text)).toThrow(message);
  });

  it('keeps a group named like an object key as a group, not a prototype', () => {
    const map = parseSsoRoleMap('{"__proto__":"admin","constructor":"viewer"}');
    expect(rolesForGroups(map, ['__proto__'])).toEqual([{ role: 'admin', tenantId: null }]);
    expect(rolesForGroups(map, ['toString'])).toEqual([]);
  });

  it('gives each binding the groups earn once, and nothing for unmapped groups', () => {
    const map = parseSsoRoleMap(
      JSON.stringify({
        admins: 'admin',
        'also-admins': 'admin',
        'support-a': { role: 'operator', tenants: [tenantA] },
        'support-ab': { role: 'operator', tenants: [tenantA, tenantB] },
      }),
    );
    expect(rolesForGroups(map, ['admins', 'also-admins', 'admins'])).toEqual([
      { role: 'admin', tenantId: null },
    ]);
    expect(rolesForGroups(map, ['support-a', 'support-ab', 'marketing'])).toEqual([
      { role: 'operator', tenantId: tenantA },
      { role: 'operator', tenantId: tenantB },
    ]);
    expect(rolesForGroups(map, ['marketing'])).toEqual([]);
    expect(rolesForGroups(map, [])).toEqual([]);
  });
});

describe('the SSO settings', () => {
  const read = (env: NodeJS.ProcessEnv, publicUrl: string | null = 'https://tdp.example.com/') =>
    readConfiguration([ssoSettings], env, publicUrl ? { publicUrl } : {});
  const configured = {
    TDP_OIDC_ISSUER: 'https://id.example.com',
    TDP_OIDC_CLIENT_ID: 'tdp',
    TDP_OIDC_CLIENT_SECRET: 'secret',
  };

  it('are off without an issuer, whatever else is set', () => {
    const settings = read({ TDP_OIDC_ROLE_MAP: '{"ops":"viewer"}' });
    expect(oidcSignInSettings(settings as never)).toBeNull();
  });

  it('default the scopes, the claims and the redirect URL (under the public URL)', () => {
    const settings = read({ ...configured, TDP_OIDC_ROLE_MAP: '{"ops":"viewer"}' });
    expect(oidcSignInSettings(settings as never)).toEqual({
      issuer: 'https://id.example.com',
      clientId: 'tdp',
      clientSecret: 'secret',
      redirectUrl: 'https://tdp.example.com/dashboard/api/sso/callback',
      scopes: 'openid email profile',
      nameClaim: 'email',
      groupsClaim: 'groups',
    });
    expect(rolesForGroups(settings.oidcRoleMap as never, ['ops'])).toEqual([
      { role: 'viewer', tenantId: null },
    ]);
  });

  it.each([
    [{ TDP_OIDC_ROLE_MAP: '{"ops":"root"}' }, 'TDP_OIDC_ROLE_MAP: group "ops": the role must be one of'],
    [{ TDP_OIDC_ISSUER: 'http://id.example.com' }, 'TDP_OIDC_ISSUER must be an https URL'],
    [{ TDP_OIDC_CLIENT_ID: '' }, 'TDP_OIDC_CLIENT_ID is required'],
    [{ TDP_OIDC_CLIENT_SECRET: '' }, 'TDP_OIDC_CLIENT_SECRET is required'],
    [{ TDP_OIDC_SCOPES: 'email profile' }, 'TDP_OIDC_SCOPES must include openid'],
  ])('stop the start on %o', (env, message) => {
    expect(() => read({ ...configured, ...env })).toThrow(ConfigError);
    expect(() => read({ ...configured, ...env })).toThrow(message);
  });

  it('take a plain-http issuer on this machine only (a test provider, tdp dev)', () => {
    const settings = read({ ...configured, TDP_OIDC_ISSUER: 'http://127.0.0.1:9999' });
    expect(settings.oidcIssuer).toBe('http://127.0.0.1:9999');
  });
});
