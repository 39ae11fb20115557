/**
 * The versioned registries: status definitions (business status → lifecycle) and operation definitions
 * (who reports which event types, with which data schemas). A version, once defined, never changes:
 * tasks and executions that bound it keep its meaning. Defining the same content again is a harmless
 * replay.
 */
import { newId, type OperationDefinitionRequest, type StatusDefinitionRequest } from '@tdp/protocol';
import type { OperatorAuditRecord, StatusDefinition } from '../facts/records.ts';
import { canonicalJson } from '../shared/canonicalJson.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock } from '../shared/ports.ts';
import type {
  JsonSchemaValidator,
  OperationDefinition,
  RegistryAuthor,
  RegistryLookup,
  RegistryStore,
} from './ports.ts';

/** Cached reads of immutable registry versions. */
export class RegistryCatalog implements RegistryLookup {
  private readonly statuses = new Map<string, StatusDefinition>();
  private readonly operations = new Map<string, OperationDefinition>();

  constructor(readonly store: RegistryStore) {}

  async statusDefinition(
    applicationId: string,
    taskType: string | null,
    version: number | null,
  ): Promise<StatusDefinition | null> {
    if (taskType === null || version === null) return null;
    const key = `${applicationId}/${taskType}/${version}`;
    const cached = this.statuses.get(key);
    if (cached) return cached;
    const found = await this.store.getStatusDefinition(applicationId, taskType, version);
    if (found) this.statuses.set(key, found);
    return found;
  }

  /** A bound version (cached forever) or, with no version, the newest one (not cached: it may change). */
  async operationDefinition(
    applicationId: string,
    operationCode: string,
    version: number | null,
  ): Promise<OperationDefinition | null> {
    if (version === null) return this.store.getOperationDefinition(applicationId, operationCode);
    const key = `${applicationId}/${operationCode}/${version}`;
    const cached = this.operations.get(key);
    if (cached) return cached;
    const found = await this.store.getOperationDefinition(applicationId, operationCode, version);
    if (found) this.operations.set(key, found);
    return found;
  }
}

/** The audit record of an operator's new registry version, kept only if the version is new. */
function registryAudit(
  by: RegistryAuthor | undefined,
  action: string,
  applicationId: string,
  at: Date,
  details: Record<string, unknown>,
): OperatorAuditRecord | undefined {
  if (!by) return undefined;
  return {
    id: newId(),
    action,
    subjectId: applicationId,
    actor: by.actor,
    reason: '',
    details,
    tenantId: by.tenantId,
    createdAt: at,
  };
}

export async function defineStatuses(
  deps: { registries: RegistryStore; clock: Clock },
  applicationId: string,
  request: StatusDefinitionRequest,
  by?: RegistryAuthor,
): Promise<{ definition: StatusDefinition; created: boolean }> {
  const codes = new Set<string>();
  for (const [index, status] of request.statuses.entries()) {
    if (codes.has(status.code)) {
      throw new AppError('VALIDATION_FAILED', `status code ${status.code} appears twice`, [
        { path: `/statuses/${index}/code`, message: 'duplicate code' },
      ]);
    }
    codes.add(status.code);
  }
  for (const [index, status] of request.statuses.entries()) {
    for (const from of status.allowedFrom ?? []) {
      if (!codes.has(from) && !['PENDING', 'RUNNING'].includes(from)) {
        throw new AppError('VALIDATION_FAILED', `${status.code}.allowedFrom names unknown status ${from}`, [
          { path: `/statuses/${index}/allowedFrom`, message: `unknown status ${from}` },
        ]);
      }
    }
  }
  const definition: StatusDefinition = {
    applicationId,
    taskType: request.taskType,
    version: request.version,
    statuses: request.statuses,
    createdAt: deps.clock.now(),
  };
  const { inserted, stored } = await deps.registries.insertStatusDefinition(
    definition,
    registryAudit(by, 'STATUS_DEFINITION_ADDED', applicationId, definition.createdAt, {
      taskType: definition.taskType,
      version: definition.version,
    }),
  );
  if (!inserted && canonicalJson(stored.statuses) !== canonicalJson(definition.statuses)) {
    throw new AppError(
      'REGISTRY_VERSION_EXISTS',
      `${request.taskType} status definition v${request.version} exists with other content; define a new version`,
    );
  }
  return { definition: stored, created: inserted };
}

export async function defineOperation(
  deps: { registries: RegistryStore; clock: Clock; schemas: JsonSchemaValidator },
  applicationId: string,
  request: OperationDefinitionRequest,
  by?: RegistryAuthor,
): Promise<{ definition: OperationDefinition; created: boolean }> {
  for (const [name, schema] of Object.entries(request.dataSchemas)) {
    for (const eventType of schema.eventTypes) {
      if (!request.allowedEventTypes.includes(eventType as (typeof request.allowedEventTypes)[number])) {
        throw new AppError(
          'VALIDATION_FAILED',
          `data schema ${name} names event type ${eventType}, which the operation does not allow`,
          [{ path: `/dataSchemas/${name}/eventTypes`, message: `${eventType} is not in allowedEventTypes` }],
        );
      }
    }
    const errors = deps.schemas.checkSchema(schema.jsonSchema);
    if (errors.length > 0) {
      throw new AppError(
        'VALIDATION_FAILED',
        `data schema ${name} is not a valid JSON Schema: ${errors[0]!.message}`,
        [{ path: `/dataSchemas/${name}/jsonSchema${errors[0]!.path}`, message: errors[0]!.message }],
      );
    }
  }
  const definition: OperationDefinition = {
    applicationId,
    operationCode: request.operationCode,
    version: request.version,
    displayName: request.displayName,
    taskTypePattern: request.taskTypePattern ?? '*',
    producerPattern: request.producerPattern,
    allowedEventTypes: request.allowedEventTypes,
    dataSchemas: request.dataSchemas,
    failurePolicy: request.failurePolicy ?? 'FAIL_TASK',
    createdAt: deps.clock.now(),
  };
  const { inserted, stored } = await deps.registries.insertOperationDefinition(
    definition,
    registryAudit(by, 'OPERATION_DEFINITION_ADDED', applicationId, definition.createdAt, {
      operationCode: definition.operationCode,
      version: definition.version,
    }),
  );
  const comparable = (d: OperationDefinition) => canonicalJson({ ...d, createdAt: null });
  if (!inserted && comparable(stored) !== comparable(definition)) {
    throw new AppError(
      'REGISTRY_VERSION_EXISTS',
      `${request.operationCode} v${request.version} exists with other content; define a new version`,
    );
  }
  return { definition: stored, created: inserted };
}
