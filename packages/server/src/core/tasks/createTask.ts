import type { CreateTaskRequest, TaskWithExecution } from '@tdp/protocol';
import type { DefinitionCatalog } from '../definitions/catalog.ts';
import type { JsonSchemaValidator } from '../definitions/ports.ts';
import { checkOutboundUrl } from '../identity/applications.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { fingerprint } from '../shared/canonicalJson.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import { lifecycleOf } from './execution.ts';
import type { ExecutionRecord, StepRecord, TaskEventRecord, TaskRecord } from './model.ts';
import { outboxFor } from './outboxEvents.ts';
import type { OutboxSignal, TaskStore } from './ports.ts';
import { applyStepConstraints } from './snapshot.ts';
import { toTaskView } from './views.ts';

export interface CreateTaskDeps {
  tasks: TaskStore;
  definitions: DefinitionCatalog;
  schemas: JsonSchemaValidator;
  clock: Clock;
  ids: IdGenerator;
  signal: OutboxSignal;
  allowInsecureCallbacks: boolean;
}

export interface CreateTaskResult {
  /** 201 the first time, 200 when the same request is replayed with the same key. */
  status: 201 | 200;
  body: TaskWithExecution;
}

const operation = 'task.create';

/**
 * Accepts a task: validates it against the published workflow, freezes the definition into execution #1
 * and writes the idempotency record, task, execution, steps, first event and outbox row in one
 * transaction. Replays with the same key and request return the original answer.
 */
export async function createTask(
  deps: CreateTaskDeps,
  principal: ApplicationPrincipal,
  idempotencyKey: string,
  request: CreateTaskRequest,
): Promise<CreateTaskResult> {
  if (request.callbackUrl !== undefined) {
    const problem = checkOutboundUrl(request.callbackUrl, deps.allowInsecureCallbacks);
    if (problem) {
      throw new AppError('CALLBACK_URL_INVALID', `callbackUrl ${problem}`, [
        { path: '/callbackUrl', message: problem },
      ]);
    }
  }
  const definition = await deps.definitions.resolve(
    principal.tenantId,
    request.workflowName,
    request.workflowVersion,
  );
  if (!definition) {
    throw new AppError(
      'UNKNOWN_WORKFLOW',
      `no workflow "${request.workflowName}" version "${request.workflowVersion}" is published`,
    );
  }
  const input = request.input ?? {};
  const inputErrors = deps.schemas.validate(definition.id, definition.inputSchema, input);
  if (inputErrors.length > 0) {
    throw new AppError(
      'INPUT_INVALID',
      inputErrors.map((e) => `${e.path || '/'} ${e.message}`).join('; '),
      inputErrors.map((e) => ({ path: `/input${e.path}`, message: e.message })),
    );
  }
  const merged = applyStepConstraints(definition.steps, request.stepConstraints);
  if (merged.errors.length > 0) {
    throw new AppError(
      'STEP_CONSTRAINTS_INVALID',
      merged.errors.map((e) => e.message).join('; '),
      merged.errors,
    );
  }

  const now = deps.clock.now();
  const task: TaskRecord = {
    id: deps.ids.newId(),
    tenantId: principal.tenantId,
    applicationId: principal.applicationId,
    workflowDefinitionId: definition.id,
    workflowName: definition.name,
    workflowVersion: definition.version,
    name: request.name.trim(),
    externalRef: request.externalRef ?? null,
    input,
    callbackUrl: request.callbackUrl ?? null,
    priority: request.priority ?? 50,
    ownerId: request.ownerId ?? null,
    lifecycleStatus: lifecycleOf('CREATED'),
    version: 1n,
    currentExecutionId: deps.ids.newId(),
    createdAt: now,
    updatedAt: now,
  };
  const execution: ExecutionRecord = {
    id: task.currentExecutionId,
    taskId: task.id,
    number: 1,
    status: 'CREATED',
    progress: 0,
    snapshot: {
      definitionId: definition.id,
      name: definition.name,
      version: definition.version,
      steps: merged.steps,
    },
    version: 1n,
    createdAt: now,
    startedAt: null,
    completedAt: null,
    updatedAt: now,
  };
  const steps: StepRecord[] = merged.steps.map((step) => ({
    id: deps.ids.newId(),
    executionId: execution.id,
    key: step.key,
    capability: step.capability,
    capabilityVersion: step.capabilityVersion,
    dependsOn: step.dependsOn,
    status: 'WAITING',
    version: 1n,
    createdAt: now,
    updatedAt: now,
  }));
  const event: TaskEventRecord = {
    id: deps.ids.newId(),
    taskId: task.id,
    executionId: execution.id,
    taskVersion: 1n,
    type: 'execution.created',
    producer: `application:${principal.applicationId}`,
    payload: {
      status: execution.status,
      externalRef: task.externalRef,
      workflow: { name: definition.name, version: definition.version },
    },
    occurredAt: now,
  };
  const body = toTaskView({ task, execution, steps });
  const requestHash = fingerprint(request);

  const existing = await deps.tasks.createTask(
    {
      principal: `application:${principal.applicationId}`,
      operation,
      key: idempotencyKey,
      requestHash,
      responseStatus: 201,
      responseBody: body,
      createdAt: now,
    },
    { task, execution, steps, event, outbox: [outboxFor(task, event)] },
  );
  if (existing) {
    if (existing.requestHash !== requestHash) {
      throw new AppError(
        'IDEMPOTENCY_KEY_REUSED',
        `Idempotency-Key "${idempotencyKey}" was used for a different request; use a new key for a new task`,
      );
    }
    return { status: 200, body: existing.responseBody as TaskWithExecution };
  }
  deps.signal.outboxWritten();
  return { status: 201, body };
}
