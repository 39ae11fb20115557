/**
 * The dashboard's single sign-on settings (OpenID Connect). `TDP_OIDC_ISSUER` unset: no single sign-on
 * (the SSO routes answer 404). Set: the client id and secret are required, and a role map that does not
 * parse stops the start, naming the entry at fault. The provider itself is reached only at the first
 * sign-in, so a provider that is down never stops the start.
 */
import type { Static } from 'typebox';
import { Type } from 'typebox';
import { isLoopbackUrl, type OidcSignInSettings } from '../../adapters/outbound/oidc/oidcSignIn.ts';
import { parseSsoRoleMap, type SsoRoleMap } from '../../core/identity/ssoRoles.ts';
import { ConfigError, setting, settingsSlice } from '../../host/settings.ts';

/** The callback route, under the public URL, when TDP_OIDC_REDIRECT_URL does not say otherwise. */
export const ssoCallbackPath = '/dashboard/api/sso/callback';

/** The settings, to merge into the dashboard feature's slice (with `checkSsoSettings` in its check). */
export const ssoSettingProperties = {
  oidcIssuer: setting.optionalString({
    env: 'TDP_OIDC_ISSUER',
    description:
      'The OpenID provider operators sign in through (its issuer URL; https, or http on 127.0.0.1 or localhost only); unset: no single sign-on.',
  }),
  oidcClientId: setting.optionalString({
    env: 'TDP_OIDC_CLIENT_ID',
    description: "The dashboard's client id at the provider (required with `TDP_OIDC_ISSUER`).",
  }),
  oidcClientSecret: setting.optionalString({
    env: 'TDP_OIDC_CLIENT_SECRET',
    description: 'Its client secret (required with `TDP_OIDC_ISSUER`; sent with HTTP Basic).',
  }),
  oidcRedirectUrl: setting.optionalString({
    env: 'TDP_OIDC_REDIRECT_URL',
    description: `Where the provider sends the browser back, as registered there; unset: \`<TDP_PUBLIC_URL>${ssoCallbackPath}\`.`,
  }),
  oidcScopes: setting.string({
    env: 'TDP_OIDC_SCOPES',
    default: 'openid email profile',
    description: 'The scopes asked for, separated by spaces (`openid` among them).',
  }),
  oidcNameClaim: setting.string({
    env: 'TDP_OIDC_NAME_CLAIM',
    default: 'email',
    description: 'The claim whose value names the operator (else the `name` claim).',
  }),
  oidcGroupsClaim: setting.string({
    env: 'TDP_OIDC_GROUPS_CLAIM',
    default: 'groups',
    description: "The claim that lists the person's groups (from the ID token, else the userinfo endpoint).",
  }),
  oidcRoleMap: setting.custom<SsoRoleMap>({
    variables: ['TDP_OIDC_ROLE_MAP'],
    typeName: 'JSON',
    default: new Map(),
    defaultText: '`{}`',
    description:
      'Which role each provider group gives, set again at each sign-in: `{ "<group>": "admin" | { "role": "operator", "tenants": ["<tenant id>"] } }` (roles `viewer`, `operator`, `admin`; without `tenants`, platform-wide). A person in no mapped group is refused (`SSO_NO_ROLE`).',
    parse: (env) => {
      const raw = env.TDP_OIDC_ROLE_MAP?.trim();
      if (!raw) return undefined;
      try {
        return parseSsoRoleMap(raw);
      } catch (error) {
        throw new ConfigError(`TDP_OIDC_ROLE_MAP: ${(error as Error).message}`);
      }
    },
  }),
};

const schema = Type.Object(ssoSettingProperties);
export type SsoSettings = Static<typeof schema>;

/** Refuses an incomplete or unsafe SSO setup; completes the redirect URL from the public URL. */
export function checkSsoSettings(settings: SsoSettings, all: Readonly<Record<string, unknown>>): void {
  if (!settings.oidcIssuer) return;
  const issuer = URL.parse(settings.oidcIssuer);
  if (!issuer || (issuer.protocol !== 'https:' && !isLoopbackUrl(issuer)))
    throw new ConfigError('TDP_OIDC_ISSUER must be an https URL (http only on 127.0.0.1 or localhost)');
  if (!settings.oidcClientId) throw new ConfigError('TDP_OIDC_CLIENT_ID is required with TDP_OIDC_ISSUER');
  if (!settings.oidcClientSecret)
    throw new ConfigError('TDP_OIDC_CLIENT_SECRET is required with TDP_OIDC_ISSUER');
  if (!settings.oidcScopes.split(/\s+/).includes('openid'))
    throw new ConfigError('TDP_OIDC_SCOPES must include openid');
  if (!settings.oidcRedirectUrl) {
    const publicUrl = typeof all.publicUrl === 'string' ? all.publicUrl : null;
    if (!publicUrl) throw new ConfigError('TDP_OIDC_REDIRECT_URL is required when there is no public URL');
    settings.oidcRedirectUrl = `${publicUrl.replace(/\/+$/, '')}${ssoCallbackPath}`;
  }
  if (!URL.canParse(settings.oidcRedirectUrl)) throw new ConfigError('TDP_OIDC_REDIRECT_URL must be a URL');
}

/** The slice on its own (for its tests, and for a feature that takes it whole). */
export const ssoSettings = settingsSlice(schema, checkSsoSettings);

/** The sign-in adapter's settings; null when single sign-on is off. Call after the checks ran. */
export function oidcSignInSettings(settings: SsoSettings): OidcSignInSettings | null {
  if (!settings.oidcIssuer) return null;
  return {
    issuer: settings.oidcIssuer,
    clientId: settings.oidcClientId!,
    clientSecret: settings.oidcClientSecret!,
    redirectUrl: settings.oidcRedirectUrl!,
    scopes: settings.oidcScopes,
    nameClaim: settings.oidcNameClaim,
    groupsClaim: settings.oidcGroupsClaim,
  };
}
