/**
 * Development files: the resource provider `tdp dev` gives its development application (files under
 * `.tdp/files`). Served only when `developmentFiles` is set, which `tdp dev` does and `tdp server` never
 * does.
 */
import { Type } from 'typebox';
import { derivedKey } from '../../adapters/outbound/tokens/executionCredentials.ts';
import { defineFeature } from '../../host/feature.ts';
import { setting, settingsSlice } from '../../host/settings.ts';
import { registerDevelopmentFiles } from './developmentFiles.ts';

const settings = settingsSlice(
  Type.Object({
    developmentFiles: setting.value<{ directory: string; providerToken: string } | null>({
      default: null,
      description:
        'The folder the development provider serves and the token TDP sends it (`tdp dev` sets it).',
    }),
    developmentFilesGrantTtlMs: setting.value({
      default: 15 * 60_000,
      description: "The development provider's file URLs expire after this long.",
    }),
    developmentFilesMaxBytes: setting.value({
      default: 1024 ** 3,
      description: 'The development provider accepts uploads of at most this many bytes.',
    }),
  }),
);

export const developmentFeature = defineFeature({
  name: 'development',
  settings,
  start(host, settings) {
    const files = settings.developmentFiles;
    if (!files) return {};
    const { secretKeyring } = host.settings;
    return {
      routes: async (app) =>
        registerDevelopmentFiles(app, {
          directory: files.directory,
          providerToken: files.providerToken,
          signingKey: derivedKey(secretKeyring, secretKeyring.activeKeyId, 'development-files'),
          authenticator: host.need('identity').authenticator,
          clock: host.clock,
          allowInsecureUrls: host.settings.allowInsecureCallbacks,
          grantTtlMs: settings.developmentFilesGrantTtlMs,
          maxBytes: settings.developmentFilesMaxBytes,
        }),
    };
  },
});
