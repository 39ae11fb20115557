/**
 * Development files: the resource provider `tdp dev` gives its development application (files under
 * `.tdp/files`). Served only when `developmentFiles` is set, which `tdp dev` does and `tdp server` never
 * does.
 */
import { Type } from 'typebox';
import { derivedKey } from '../../adapters/outbound/tokens/executionCredentials.ts';
import { tokensEqual } from '../../core/identity/apiKeys.ts';
import { openApplicationSecrets } from '../../core/identity/applications.ts';
import { defineFeature } from '../../host/feature.ts';
import { setting, settingsSlice } from '../../host/settings.ts';
import { privateFilesFolder, registerDevelopmentFiles } from './developmentFiles.ts';

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
    const identity = host.need('identity');
    // The application this provider serves is the one registered with its token (`tdp dev`'s own).
    const servesApplication = async (applicationId: string) => {
      const application = await identity.store.getApplication(applicationId);
      const token = application && openApplicationSecrets(host.secrets, application).resourceProviderToken;
      return token ? tokensEqual(token, files.providerToken) : false;
    };
    return {
      routes: async (app) => {
        await privateFilesFolder(files.directory);
        registerDevelopmentFiles(app, {
          directory: files.directory,
          providerToken: files.providerToken,
          signingKey: derivedKey(secretKeyring, secretKeyring.activeKeyId, 'development-files'),
          authenticator: identity.authenticator,
          servesApplication,
          clock: host.clock,
          allowInsecureUrls: host.settings.allowInsecureCallbacks,
          grantTtlMs: settings.developmentFilesGrantTtlMs,
          maxBytes: settings.developmentFilesMaxBytes,
        });
      },
    };
  },
});
