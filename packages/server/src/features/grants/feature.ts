/**
 * Grants: a worker's access to a task's files, issued through the task's application's resource
 * provider (reserved, issued, renewed; the worker routes serve them).
 */
import { Type } from 'typebox';
import { httpResourceProvider } from '../../adapters/outbound/http/resourceProvider.ts';
import { PostgresGrantStore } from '../../adapters/outbound/postgres/grantStore.ts';
import type { GrantDeps } from '../../core/grants/grants.ts';
import { openApplicationSecrets } from '../../core/identity/applications.ts';
import { defineFeature } from '../../host/feature.ts';
import { setting, settingsSlice } from '../../host/settings.ts';

declare module '../../host/provisions.ts' {
  interface Provisions {
    grants: GrantDeps;
  }
}

const settings = settingsSlice(
  Type.Object({
    resourceProviderTimeoutMs: setting.value({
      default: 10_000,
      description: "An application's resource provider unanswered by then fails the grant (retryable).",
    }),
    grantReplayRenewal: setting.value({
      default: { remainingFraction: 0.2, remainingMs: 60_000 },
      description:
        'A replayed grant request whose stored grant has less than this left (a fraction of its lifetime, or a time) is renewed: a new URL from the provider.',
    }),
  }),
);

export const grantsFeature = defineFeature({
  name: 'grants',
  settings,
  start(host, settings) {
    const { secrets } = host;
    const identity = host.need('identity').store;
    const { workerStore } = host.need('workers');
    host.provide('grants', {
      grants: new PostgresGrantStore(host.sql),
      provider: httpResourceProvider(settings.resourceProviderTimeoutMs, host.egress),
      secrets,
      clock: host.clock,
      ids: host.ids,
      allowInsecureUrls: host.settings.allowInsecureCallbacks,
      replayRenewal: settings.grantReplayRenewal,
      attempt: async (id) => (await host.facts.attemptsById([id]))[0] ?? null,
      credentialOfWorker: async (id) => (await workerStore.findWorkerOwner(id))?.credentialId ?? null,
      providerOf: async (applicationId) => {
        const application = await identity.getApplication(applicationId);
        if (!application?.resourceProviderUrl) return null;
        return {
          url: application.resourceProviderUrl,
          token: openApplicationSecrets(secrets, application).resourceProviderToken,
        };
      },
    });
    return {};
  },
});
