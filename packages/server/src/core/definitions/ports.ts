import type { FailurePolicy, FieldError, StepDefinition } from '@tdp/protocol';
import type { OperatorActor, OperatorAuditRecord, StatusDefinition } from '../facts/records.ts';
import { AppError } from '../shared/errors.ts';

export interface StoredDefinition {
  id: string;
  tenantId: string;
  name: string;
  version: string;
  description: string | null;
  inputSchema: Record<string, unknown>;
  steps: StepDefinition[];
  contentHash: string;
  publishedBy: string;
  publishedAt: Date;
}

export interface DefinitionStore {
  /** Inserts unless (tenant, name, version) exists; returns the row that is stored either way. */
  insertIfAbsent(definition: StoredDefinition): Promise<{ inserted: boolean; stored: StoredDefinition }>;
  get(tenantId: string, name: string, version: string): Promise<StoredDefinition | null>;
  list(
    tenantId: string,
    filter: { name?: string; limit: number; after?: string },
  ): Promise<StoredDefinition[]>;
}

/** JSON Schema support: checks that a document is a schema, and validates values against one. */
export interface JsonSchemaValidator {
  /** Errors in the schema itself; empty when it is a valid JSON Schema (draft 2020-12). */
  checkSchema(schema: Record<string, unknown>): FieldError[];
  /** Errors of `value` against `schema`; `cacheKey` identifies an immutable schema for compilation reuse. */
  validate(cacheKey: string, schema: Record<string, unknown>, value: unknown): FieldError[];
}

export interface OperationDefinition {
  applicationId: string;
  operationCode: string;
  version: number;
  displayName: string;
  taskTypePattern: string;
  producerPattern: string;
  allowedEventTypes: string[];
  dataSchemas: Record<string, { eventTypes: string[]; jsonSchema: Record<string, unknown> }>;
  failurePolicy: FailurePolicy;
  createdAt: Date;
}

export interface RegistryStore {
  /** Inserts a new version (with its audit record, when given, in the same transaction). */
  insertStatusDefinition(
    definition: StatusDefinition,
    audit?: OperatorAuditRecord,
  ): Promise<{ inserted: boolean; stored: StatusDefinition }>;
  getStatusDefinition(
    applicationId: string,
    taskType: string,
    version: number,
  ): Promise<StatusDefinition | null>;
  listStatusDefinitions(applicationId: string): Promise<StatusDefinition[]>;
  insertOperationDefinition(
    definition: OperationDefinition,
    audit?: OperatorAuditRecord,
  ): Promise<{ inserted: boolean; stored: OperationDefinition }>;
  /** The newest enabled version, or a given one. */
  getOperationDefinition(
    applicationId: string,
    operationCode: string,
    version?: number,
  ): Promise<OperationDefinition | null>;
  listOperationDefinitions(applicationId: string): Promise<OperationDefinition[]>;
}

/** Published definitions by name and version (cached by the catalog: a published version never changes). */
export interface DefinitionLookup {
  resolve(tenantId: string, name: string, version: string): Promise<StoredDefinition | null>;
}

/** The published workflow a task (or a schedule's tasks) will run; UNKNOWN_WORKFLOW when there is none. */
export async function publishedWorkflow(
  lookup: DefinitionLookup,
  tenantId: string,
  name: string,
  version: string,
): Promise<StoredDefinition> {
  const definition = await lookup.resolve(tenantId, name, version);
  if (!definition)
    throw new AppError('UNKNOWN_WORKFLOW', `no workflow "${name}" version "${version}" is published`);
  return definition;
}

/** A task input its workflow's input schema accepts; INPUT_INVALID with the fields (under `/input`). */
export function requireValidInput(
  schemas: JsonSchemaValidator,
  definition: StoredDefinition,
  input: unknown,
): void {
  const errors = schemas.validate(definition.id, definition.inputSchema, input);
  if (errors.length > 0) {
    throw new AppError(
      'INPUT_INVALID',
      errors.map((e) => `${e.path || '/'} ${e.message}`).join('; '),
      errors.map((e) => ({ path: `/input${e.path}`, message: e.message })),
    );
  }
}

/** Registry versions as bound by tasks and steps (a bound version never changes). */
export interface RegistryLookup {
  statusDefinition(
    applicationId: string,
    taskType: string | null,
    version: number | null,
  ): Promise<StatusDefinition | null>;
  /** A bound version or, with no version, the newest one. */
  operationDefinition(
    applicationId: string,
    operationCode: string,
    version: number | null,
  ): Promise<OperationDefinition | null>;
}

/** Who defines a registry version, for its audit record (none: TDP's own set-up). */
export interface RegistryAuthor {
  actor: OperatorActor;
  tenantId: string;
}
