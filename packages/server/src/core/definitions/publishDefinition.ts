import type { PublishWorkflowDefinitionRequest } from '@tdp/protocol';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { fingerprint } from '../shared/canonicalJson.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import { checkChildWorkflows } from './childWorkflows.ts';
import { applyConcurrency, concurrencyErrors } from './concurrencyKeys.ts';
import { normaliseSteps, validateSteps } from './dag.ts';
import { unguaranteedMappings } from './mappingGuarantees.ts';
import type { DefinitionLookup, DefinitionStore, JsonSchemaValidator, StoredDefinition } from './ports.ts';
import { applyRateLimits, rateLimitErrors } from './rateLimits.ts';
import { applyScheduleToStart } from './scheduleToStart.ts';
import { kindSchemas } from './stepKinds.ts';

export interface DefinitionDeps {
  store: DefinitionStore;
  schemas: JsonSchemaValidator;
  /** The published workflows a child-task step may start. */
  lookup: DefinitionLookup;
  clock: Clock;
  ids: IdGenerator;
}

/**
 * Publishes a workflow definition for the caller's tenant. A name + version is immutable: publishing the
 * same content again returns the stored definition (safe to retry), different content is a conflict.
 */
export async function publishDefinition(
  deps: DefinitionDeps,
  principal: ApplicationPrincipal,
  request: PublishWorkflowDefinitionRequest,
): Promise<{ definition: StoredDefinition; created: boolean }> {
  // The workflow's limit, for its steps that set none.
  const steps = applyRateLimits(
    applyConcurrency(
      applyScheduleToStart(normaliseSteps(request.steps), undefined, request.scheduleToStartMs ?? 0),
      request.steps,
      request.concurrency,
    ),
    request.steps,
    request.rateLimits,
  );
  const inputSchema = request.inputSchema ?? {};
  const errors = [
    ...validateSteps(steps),
    ...concurrencyErrors(request, steps, inputSchema),
    ...rateLimitErrors(request, steps, inputSchema),
    ...deps.schemas
      .checkSchema(inputSchema)
      .map((e) => ({ path: `/inputSchema${e.path}`, message: e.message })),
    ...kindSchemas(steps).flatMap(({ path, schema }) =>
      deps.schemas.checkSchema(schema).map((e) => ({ path: `${path}${e.path}`, message: e.message })),
    ),
    ...(await checkChildWorkflows(deps.lookup, principal.tenantId, steps)),
  ];
  if (errors.length > 0) {
    throw new AppError('WORKFLOW_DEFINITION_INVALID', errors.map((e) => e.message).join('; '), errors);
  }
  // Capabilities' output schemas are not known here, so `$.steps…` references are left to run time.
  const unguaranteed = unguaranteedMappings(steps, inputSchema);
  if (unguaranteed.length > 0) {
    throw new AppError(
      'INPUT_MAPPING_NOT_GUARANTEED',
      unguaranteed.map((e) => e.message).join('; '),
      unguaranteed,
    );
  }
  const description = request.description ?? null;
  const contentHash = fingerprint({ description, inputSchema, steps });
  const { inserted, stored } = await deps.store.insertIfAbsent({
    id: deps.ids.newId(),
    tenantId: principal.tenantId,
    name: request.name,
    version: request.version,
    description,
    inputSchema,
    steps,
    contentHash,
    publishedBy: principal.applicationId,
    publishedAt: deps.clock.now(),
  });
  if (!inserted && stored.contentHash !== contentHash) {
    throw new AppError(
      'WORKFLOW_VERSION_EXISTS',
      `${request.name} version ${request.version} is already published with different content; publish a new version`,
    );
  }
  return { definition: stored, created: inserted };
}
