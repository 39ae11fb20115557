/** Definitions: published workflows, the status and operation registries, and JSON Schema checks. */
import { registerDefinitionRoutes } from '../../adapters/inbound/http/definitionsRoutes.ts';
import { AjvJsonSchemaValidator } from '../../adapters/outbound/jsonschema/ajvValidator.ts';
import { PostgresCapabilityOffers } from '../../adapters/outbound/postgres/capabilityOffers.ts';
import { PostgresDefinitionStore } from '../../adapters/outbound/postgres/definitionStore.ts';
import { PostgresRegistryStore } from '../../adapters/outbound/postgres/registryStore.ts';
import { DefinitionCatalog } from '../../core/definitions/catalog.ts';
import type { DefinitionStore, JsonSchemaValidator, RegistryStore } from '../../core/definitions/ports.ts';
import { RegistryCatalog } from '../../core/definitions/registries.ts';
import { defineFeature } from '../../host/feature.ts';

export interface Definitions {
  store: DefinitionStore;
  /** Published definitions as the use cases look them up (cached). */
  catalog: DefinitionCatalog;
  registryStore: RegistryStore;
  registries: RegistryCatalog;
  schemas: JsonSchemaValidator;
}

declare module '../../host/provisions.ts' {
  interface Provisions {
    definitions: Definitions;
  }
}

export const definitionsFeature = defineFeature({
  name: 'definitions',
  start(host) {
    const store = new PostgresDefinitionStore(host.sql);
    const registryStore = new PostgresRegistryStore(host.sql);
    const definitions: Definitions = {
      store,
      catalog: new DefinitionCatalog(store),
      registryStore,
      registries: new RegistryCatalog(registryStore),
      schemas: new AjvJsonSchemaValidator(),
    };
    host.provide('definitions', definitions);
    return {
      routes: async (app) =>
        registerDefinitionRoutes(app, {
          authenticator: host.need('identity').authenticator,
          definitions: {
            store,
            schemas: definitions.schemas,
            lookup: definitions.catalog,
            clock: host.clock,
            ids: host.ids,
          },
          offers: new PostgresCapabilityOffers(host.sql),
        }),
    };
  },
});
