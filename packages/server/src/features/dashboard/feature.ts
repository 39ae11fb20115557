/**
 * The operator dashboard: sign-in (password, single sign-on, the bootstrap token), its API
 * (`/dashboard/api`, behind the signed-in operator's server-side session, scoped to the tenants their
 * roles reach) and its built pages (`/dashboard/`). It acts through the same use cases as the admin API.
 */
import { Type } from 'typebox';
import { registerDashboardRoutes } from '../../adapters/inbound/http/dashboardRoutes.ts';
import {
  dashboardGate,
  registerDashboardSessionRoutes,
  setOpenedSessionCookie,
} from '../../adapters/inbound/http/dashboardSessionRoutes.ts';
import { registerDashboardSsoRoutes } from '../../adapters/inbound/http/dashboardSsoRoutes.ts';
import { OidcSignIn } from '../../adapters/outbound/oidc/oidcSignIn.ts';
import { derivedKey } from '../../adapters/outbound/tokens/executionCredentials.ts';
import { JetStreamBridgeBacklog } from '../../adapters/temporal/bridgeBacklog.ts';
import { signInWithSso } from '../../core/identity/operatorSignIn.ts';
import { rolesForGroups } from '../../core/identity/ssoRoles.ts';
import { defineFeature } from '../../host/feature.ts';
import { setting, settingsSlice } from '../../host/settings.ts';
import { dashboardPages } from './dashboardPages.ts';
import { checkSsoSettings, oidcSignInSettings, ssoSettingProperties } from './ssoSettings.ts';

const settings = settingsSlice(
  Type.Object({
    ...ssoSettingProperties,
    dashboardDirectory: setting.optionalString({
      env: 'TDP_DASHBOARD_DIR',
      description: "The dashboard's built pages; unset: the installed `@tdp/dashboard`'s.",
    }),
  }),
  checkSsoSettings,
);

export const dashboardFeature = defineFeature({
  name: 'dashboard',
  settings,
  async start(host, settings) {
    // A wrong TDP_DASHBOARD_DIR stops the start rather than serving no dashboard.
    const pagesDirectory = await dashboardPages(settings.dashboardDirectory ?? null);
    const { adminToken, adminTokenEnabled, secretKeyring } = host.settings;
    return {
      routes: async (app) => {
        const operators = host.need('operators');
        const oidc = oidcSignInSettings(settings);
        const ssoEnabled = oidc !== null;
        const gate = dashboardGate(operators.sessions, ssoEnabled);
        registerDashboardSsoRoutes(app, {
          sso: oidc ? new OidcSignIn(oidc) : null,
          // The groups say which roles single sign-on gives, afresh at each sign-in.
          signIn: (identity) =>
            signInWithSso(operators.signIn, identity, rolesForGroups(settings.oidcRoleMap, identity.groups)),
          setSessionCookie: (request, reply, session) =>
            setOpenedSessionCookie(request, reply, session, host.clock.now()),
          cookieKey: derivedKey(secretKeyring, secretKeyring.activeKeyId, 'dashboard-sso'),
          clock: host.clock,
        });
        registerDashboardSessionRoutes(
          app,
          {
            sessions: operators.sessions,
            signIn: operators.signIn,
            bootstrapToken: adminTokenEnabled ? adminToken : null,
            ssoEnabled,
            realtimeKey: host.need('realtime').key,
            clock: host.clock,
            wsUrl: host.need('realtime').wsUrl,
          },
          gate,
        );
        const workers = host.need('workers');
        const operations = host.need('operations');
        const events = host.need('events');
        const realtime = host.need('realtime');
        const callbacks = host.need('callbacks').queue;
        const engine = host.need('engine');
        const status = host.need('status');
        registerDashboardRoutes(app, {
          reads: operations.dashboardReads,
          runs: host.need('tasks').store,
          callbacks,
          pipeline: { outbox: events.outbox.rows, realtime: realtime.rows, callbacks: callbacks.rows },
          charts: operations.chartReads,
          temporalBridge:
            engine.configured && events.nats
              ? new JetStreamBridgeBacklog(
                  () => events.nats!.manager(),
                  events.stream,
                  () => engine.connected(),
                )
              : null,
          gate,
          audit: operations.audit,
          accounts: operators.accounts,
          tokens: operators.tokens,
          clock: host.clock,
          taskTenant: operators.taskTenant,
          tasks: status.reads,
          archived: host.need('retention').archived,
          unschedulableReasons: (taskId) => workers.workerStore.pendingReasons(taskId),
          workers: workers.registration,
          schedules: host.need('schedules'),
          approvals: status.deps,
          operatorActions: {
            workerDrain: workers.workerDrain,
            operatorActions: operations.actions,
            requeue: operations.requeue,
          },
          queue: { reads: operations.queueReads, controls: workers.schedulingControls },
          pagesDirectory,
          wsUrl: realtime.wsUrl,
        });
      },
    };
  },
});
