/**
 * Identity: tenants, applications and their API keys, user views, the per-credential rate limits, the
 * throttle of failed authentications per client address, and the authenticator every API-key route
 * uses (each request is charged to its application there).
 */
import { Type } from 'typebox';
import { registerAdminRoutes } from '../../adapters/inbound/http/adminRoutes.ts';
import { throttleAuthFailures } from '../../adapters/inbound/http/authFailures.ts';
import {
  RateLimitedAuthenticator,
  type RateLimitedCredential,
  type RateLimitPolicies,
  RateLimits,
  rateLimitedUserTokens,
} from '../../adapters/inbound/http/rateLimits.ts';
import { registerUserViewRoutes } from '../../adapters/inbound/http/userViewRoutes.ts';
import { PostgresIdentityStore } from '../../adapters/outbound/postgres/identityStore.ts';
import { PostgresRevocations } from '../../adapters/outbound/postgres/revocationChannel.ts';
import { JoseUserTokens } from '../../adapters/outbound/tokens/userTokens.ts';
import type { ApplicationDeps } from '../../core/identity/applications.ts';
import type { ApiKeyAuthenticator } from '../../core/identity/authenticate.ts';
import type { IdentityStore, Revocations } from '../../core/identity/ports.ts';
import type { UserTokens } from '../../core/status/ports.ts';
import { defineFeature } from '../../host/feature.ts';
import { ConfigError, integerVariable, setting, settingsSlice } from '../../host/settings.ts';

export interface Identity {
  store: IdentityStore;
  applications: ApplicationDeps;
  /** Authenticates API keys and charges each request to its application. */
  authenticator: ApiKeyAuthenticator;
  rateLimits: RateLimits;
  /** User tokens, each verified one charged to its application. */
  userTokens: UserTokens;
  /** The ids of a tenant's applications (realtime scopes, notifications). */
  applicationsOf(tenantId: string): Promise<string[]>;
  /** Revoked keys and views, heard by every replica at once (each feature subscribes to its part). */
  revocations: Revocations;
}

declare module '../../host/provisions.ts' {
  interface Provisions {
    identity: Identity;
  }
}

// Far above what one process serves (`bench -- create`, `-- events`, `-- e2e` stay under ~3,000
// requests/s per credential on a developer machine): a limit against a runaway client, not a quota.
const defaultRateLimits: RateLimitPolicies = {
  application: { perSecond: 10_000, burst: 20_000 },
  worker: { perSecond: 10_000, burst: 20_000 },
  execution: { perSecond: 1_000, burst: 2_000 },
};

const credentials: RateLimitedCredential[] = ['application', 'worker', 'execution'];
const credentialNames: Record<RateLimitedCredential, string> = {
  application: "an application's API key or its user tokens",
  worker: 'a worker key',
  execution: 'an execution token',
};
const rateLimitVariable = (credential: RateLimitedCredential) => `TDP_RATE_LIMIT_${credential.toUpperCase()}`;

/** `TDP_RATE_LIMIT_<CREDENTIAL>_PER_SECOND` and `_BURST` for each credential, over the defaults. */
function rateLimitsFrom(env: NodeJS.ProcessEnv): RateLimitPolicies {
  const policies = { ...defaultRateLimits };
  for (const credential of credentials) {
    const name = rateLimitVariable(credential);
    const fallback = defaultRateLimits[credential];
    const perSecond = integerVariable(env, `${name}_PER_SECOND`, fallback.perSecond);
    const burst = integerVariable(env, `${name}_BURST`, fallback.burst);
    if (perSecond > 0 && burst < 1) throw new ConfigError(`${name}_BURST must be at least 1`);
    policies[credential] = { perSecond, burst };
  }
  return policies;
}

const settings = settingsSlice(
  Type.Object({
    authFailureLimit: setting.integer({
      env: 'TDP_AUTH_FAILURE_LIMIT',
      default: 20,
      description:
        'Refused credentials (401) from one client address within the window, after which its requests with a credential get 429 `AUTH_THROTTLED` until the window ends (`0`: no limit).',
    }),
    authFailureWindowSeconds: setting.integer({
      env: 'TDP_AUTH_FAILURE_WINDOW_SECONDS',
      default: 60,
      description: 'The window of `TDP_AUTH_FAILURE_LIMIT`, from the first failure.',
    }),
    apiKeyCacheMs: setting.value({
      default: 5_000,
      description: 'An API key, once read, is trusted this long (a revocation takes effect within it).',
    }),
    rateLimits: setting.custom<RateLimitPolicies>({
      variables: Object.fromEntries(
        credentials.flatMap((credential) => {
          const name = rateLimitVariable(credential);
          const { perSecond, burst } = defaultRateLimits[credential];
          const whose = credentialNames[credential];
          return [
            [
              `${name}_PER_SECOND`,
              {
                default: `${perSecond}`,
                description: `Requests per second with ${whose} (\`0\`: no limit).`,
              },
            ],
            [
              `${name}_BURST`,
              { default: `${burst}`, description: `The burst allowed above that rate with ${whose}.` },
            ],
          ];
        }),
      ),
      typeName: 'integer ≥ 0',
      default: defaultRateLimits,
      description: 'Token buckets per credential in each process (docs/rate-limits.md).',
      parse: (env) =>
        Object.keys(env).some((name) => name.startsWith('TDP_RATE_LIMIT_')) ? rateLimitsFrom(env) : undefined,
    }),
  }),
);

export const identityFeature = defineFeature({
  name: 'identity',
  settings,
  async start(host, { apiKeyCacheMs, rateLimits: policies, authFailureLimit, authFailureWindowSeconds }) {
    const { clock, ids, secrets, logger } = host;
    // Global hooks, before any feature registers a route: every credential checked over HTTP is covered.
    const failures = { failures: authFailureLimit, windowSeconds: authFailureWindowSeconds };
    throttleAuthFailures(host.app, failures, () => host.metrics.quotaRefused.inc({ code: 'AUTH_THROTTLED' }));
    const store = new PostgresIdentityStore(host.sql);
    const rateLimits = new RateLimits(clock, policies, host.metrics.rateLimited, logger);
    const revocations = new PostgresRevocations(host.sql, logger);
    await revocations.start();
    const applications: ApplicationDeps = {
      store,
      secrets,
      clock,
      ids,
      allowInsecureUrls: host.settings.allowInsecureCallbacks,
      egress: host.egress.policy,
    };
    const authenticator = new RateLimitedAuthenticator(store, clock, apiKeyCacheMs, rateLimits);
    // A revoked key is forgotten by every replica's cache at once; its user tokens check it on each use.
    revocations.subscribe((revocation) => {
      if (revocation.kind === 'apiKey') authenticator.forget(revocation.keyId);
    });
    const identity: Identity = {
      store,
      applications,
      authenticator,
      rateLimits,
      userTokens: rateLimitedUserTokens(
        new JoseUserTokens(host.settings.secretKeyring, (keyId) => authenticator.keyActive(keyId)),
        rateLimits,
      ),
      applicationsOf: async (tenantId) => (await store.listApplications(tenantId)).map((a) => a.id),
      revocations,
    };
    host.provide('identity', identity);
    return {
      routes: async (app) => {
        const definitions = host.need('definitions');
        const { gate } = host.need('operators');
        registerAdminRoutes(app, {
          gate,
          applications,
          authenticator: identity.authenticator,
          revocations,
          registries: { registries: definitions.registryStore, clock, schemas: definitions.schemas },
        });
        registerUserViewRoutes(app, {
          gate,
          identity: { store, clock, ids },
          authenticator: identity.authenticator,
        });
      },
      stop: () => revocations.stop(),
    };
  },
});
