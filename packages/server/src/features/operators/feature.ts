/**
 * Operators with names (docs/operators.md): accounts, role bindings, personal tokens, sign-in and
 * sessions, and the gate every operator route goes through. It provides the gate for the admin API
 * (bearer tokens) and the session machinery the dashboard signs people in with.
 */
import { Type } from 'typebox';
import { registerOperatorAccountRoutes } from '../../adapters/inbound/http/operatorAccountRoutes.ts';
import type { OperatorAuthenticate, OperatorGate } from '../../adapters/inbound/http/operatorAuth.ts';
import { bearerOperators, requireOperator } from '../../adapters/inbound/http/operatorAuth.ts';
import { Argon2Passwords } from '../../adapters/outbound/passwords/argon2Passwords.ts';
import {
  PostgresOperatorAccountStore,
  PostgresOperatorTokenStore,
} from '../../adapters/outbound/postgres/operatorAccountStore.ts';
import { PostgresOperatorSessionStore } from '../../adapters/outbound/postgres/operatorSessionStore.ts';
import { type TaskTenantLookup, taskTenantLookup } from '../../adapters/outbound/postgres/taskTenants.ts';
import { derivedKey } from '../../adapters/outbound/tokens/executionCredentials.ts';
import type { OperatorSessionDeps } from '../../core/identity/operatorSessions.ts';
import type { SignInDeps } from '../../core/identity/operatorSignIn.ts';
import type { OperatorDeps } from '../../core/identity/operators.ts';
import type { OperatorTokenDeps } from '../../core/identity/operatorTokens.ts';
import { defineFeature } from '../../host/feature.ts';
import { setting, settingsSlice } from '../../host/settings.ts';

export interface Operators {
  /** The admin API's gate (personal tokens and the bootstrap token). */
  gate: OperatorGate;
  /** Who a bearer token names (for a route that also takes an application's key). */
  bearer: OperatorAuthenticate;
  accounts: OperatorDeps;
  tokens: OperatorTokenDeps;
  sessions: OperatorSessionDeps;
  signIn: SignInDeps;
  /** Which tenant a task is of: the operator routes' scope check for an action on a task. */
  taskTenant: TaskTenantLookup;
}

declare module '../../host/provisions.ts' {
  interface Provisions {
    operators: Operators;
  }
}

const settings = settingsSlice(
  Type.Object({
    dashboardSessionIdleSeconds: setting.integer({
      env: 'TDP_DASHBOARD_SESSION_IDLE_SECONDS',
      default: 30 * 60,
      description: "An operator's dashboard session not used for this long ends (they sign in again).",
    }),
    dashboardSessionLifetimeSeconds: setting.integer({
      env: 'TDP_DASHBOARD_SESSION_LIFETIME_SECONDS',
      default: 8 * 3600,
      description: "An operator's dashboard session ends this long after sign-in, however busy.",
    }),
  }),
);

export const operatorsFeature = defineFeature({
  name: 'operators',
  settings,
  async start(host, settings) {
    const { secretKeyring, adminToken, adminTokenEnabled } = host.settings;
    const identity = host.need('identity');
    const store = new PostgresOperatorAccountStore(host.sql);
    const accounts: OperatorDeps = {
      store,
      passwords: new Argon2Passwords(),
      clock: host.clock,
      ids: host.ids,
      tenantExists: async (tenantId) => (await identity.store.getTenant(tenantId)) !== null,
      revocations: identity.revocations,
    };
    const tokens: OperatorTokenDeps = {
      tokens: new PostgresOperatorTokenStore(host.sql),
      operator: (id) => store.get(id),
      clock: host.clock,
      ids: host.ids,
    };
    const sessions: OperatorSessionDeps = {
      store: new PostgresOperatorSessionStore(host.sql),
      clock: host.clock,
      ids: host.ids,
      bootstrapEnabled: adminTokenEnabled,
      policy: {
        idleTimeoutSeconds: settings.dashboardSessionIdleSeconds,
        lifetimeSeconds: settings.dashboardSessionLifetimeSeconds,
      },
      csrfKey: derivedKey(secretKeyring, secretKeyring.activeKeyId, 'dashboard-csrf'),
    };
    const bearer = bearerOperators({ bootstrapToken: adminTokenEnabled ? adminToken : null, tokens });
    const gate: OperatorGate = (least, where) => requireOperator(bearer, least, where);
    host.provide('operators', {
      gate,
      bearer,
      accounts,
      tokens,
      sessions,
      signIn: { operators: accounts, sessions },
      taskTenant: taskTenantLookup(host.sql),
    });
    return {
      routes: async (app) =>
        registerOperatorAccountRoutes(app, { prefix: '/admin/v1', gate, accounts, tokens }),
    };
  },
});
