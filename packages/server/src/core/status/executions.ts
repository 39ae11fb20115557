/**
 * Execution contexts: activating a known step (coordinator) and registering a dynamic step (coordinator
 * or an authorised parent execution). Both bind an execution instance, issue its credentials and are
 * facts of their own (STEP_ACTIVATED, STEP_REGISTERED) on the single path.
 */
import type { DynamicRegistrationPolicy, ExecutionContext, RegisterExecutionRequest } from '@tdp/protocol';
import { matchesPattern } from '../definitions/patterns.ts';
import { newStepRecord } from '../facts/newRecords.ts';
import type { StepRecord, TaskState } from '../facts/records.ts';
import { type FactSession, inFactTransaction } from '../facts/session.ts';
import { alreadyEnded, stepIsFinished, taskAfterStepChange } from '../facts/stateMachine.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { AppError } from '../shared/errors.ts';
import { issueContext, newAttempt } from '../workers/attempts.ts';
import type { StatusDeps } from './deps.ts';
import type { ExecutionClaims } from './ports.ts';

export const defaultDynamicPolicy: Required<DynamicRegistrationPolicy> = {
  allowedParentOperations: [],
  allowedChildOperations: ['*'],
  maxDynamicSteps: 100,
  maxDepth: 4,
  maxParallelExecutions: 10,
  registrationsPerMinute: 60,
};

async function requireOwnTask(
  session: FactSession,
  principal: ApplicationPrincipal,
  taskId: string,
): Promise<TaskState> {
  const state = await session.lockTask(taskId);
  if (!state || state.task.applicationId !== principal.applicationId)
    throw new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);
  return state;
}

async function operationFor(deps: StatusDeps, state: TaskState, operationCode: string, producerId: string) {
  const operation = await deps.registries.operationDefinition(state.task.applicationId, operationCode, null);
  if (operation && !matchesPattern(operation.producerPattern, producerId)) {
    throw new AppError(
      'PRODUCER_MISMATCH',
      `producer ${producerId} may not run ${operationCode} (allowed: ${operation.producerPattern})`,
    );
  }
  if (operation && state.task.taskType && !matchesPattern(operation.taskTypePattern, state.task.taskType)) {
    throw new AppError(
      'OPERATION_NOT_ALLOWED',
      `${operationCode} does not apply to task type ${state.task.taskType}`,
    );
  }
  return operation;
}

/**
 * The coordinator activates a known step: its current attempt gets an execution instance and
 * credentials. Activating an active attempt again returns the same context; after a finished attempt,
 * `attempt: n + 1` starts a new one (the old execution's late facts become STALE_EXECUTION).
 */
export async function activateStep(
  deps: StatusDeps,
  principal: ApplicationPrincipal,
  taskId: string,
  stepKey: string,
  requestedAttempt: number | undefined,
): Promise<ExecutionContext> {
  return inFactTransaction(deps, async (session) => {
    const before = await requireOwnTask(session, principal, taskId);
    const current = before.steps.find((s) => s.key === stepKey && s.current);
    if (!current) throw new AppError('STEP_NOT_REGISTERED', `task ${taskId} has no step ${stepKey}`);
    if (before.task.finishedAt)
      throw new AppError(
        'INVALID_TRANSITION',
        `task ${taskId} ${alreadyEnded} ${before.task.lifecycleStatus}`,
      );
    const now = session.now;
    const wanted = requestedAttempt ?? current.attempt;
    if (current.attemptId && wanted === current.attempt) {
      const attempt = await session.tx.findAttempt(current.attemptId);
      if (!attempt) throw new Error(`attempt ${current.attemptId} is missing`);
      if (stepIsFinished(current.status)) {
        throw new AppError(
          'INVALID_TRANSITION',
          `step ${stepKey} attempt ${current.attempt} ended ${current.status}; activate attempt ${current.attempt + 1} to retry`,
        );
      }
      return issueContext(deps, before, current, attempt, false);
    }
    let base = current;
    const steps: StepRecord[] = [];
    const newSteps: StepRecord[] = [];
    if (wanted === current.attempt + 1 && current.attemptId) {
      if (!stepIsFinished(current.status)) {
        throw new AppError(
          'INVALID_TRANSITION',
          `step ${stepKey} attempt ${current.attempt} is still ${current.status}; it must end before attempt ${wanted}`,
        );
      }
      steps.push({ ...current, current: false, updatedAt: now });
      base = {
        ...newStepRecord(
          deps.ids,
          taskId,
          before.execution.id,
          { ...current, expectedProducer: current.expectedProducer, displayName: current.displayName },
          now,
        ),
        attempt: wanted,
        clientStepKey: current.clientStepKey,
        capability: current.capability,
        capabilityVersion: current.capabilityVersion,
        dynamic: current.dynamic,
        parentAttemptId: current.parentAttemptId,
        depth: current.depth,
      };
    } else if (wanted !== current.attempt) {
      throw new AppError(
        'STEP_NOT_REGISTERED',
        `step ${stepKey} has attempt ${current.attempt}; attempt ${wanted} cannot be activated now`,
      );
    }
    const producerId = base.expectedProducer ?? 'unknown';
    const operation = await operationFor(deps, before, base.operationCode, producerId);
    const attemptRecord = newAttempt(deps, before, base, producerId, operation, now);
    const activated: StepRecord = {
      ...base,
      attemptId: attemptRecord.id,
      operationDefinitionVersion: operation?.version ?? null,
      status: 'QUEUED',
      version: base === current ? current.version + 1n : 1n,
      updatedAt: now,
    };
    if (base === current) steps.push(activated);
    else newSteps.push(activated);
    const afterSteps = [...before.steps.map((s) => steps.find((c) => c.id === s.id) ?? s), ...newSteps];
    const moved = taskAfterStepChange(before.task, before.execution, afterSteps, undefined, now);
    const after: TaskState = { task: moved.task, execution: moved.execution, steps: afterSteps };
    await session.commit(
      before,
      after,
      {
        id: deps.ids.newId(),
        type: 'STEP_ACTIVATED',
        producer: `application:${principal.applicationId}`,
        payload: { stepId: stepKey, attempt: activated.attempt, producerId },
        occurredAt: now,
        receivedAt: now,
        stepKey,
        stepAttempt: activated.attempt,
        attemptId: attemptRecord.id,
        stepVersion: activated.version,
        operationCode: activated.operationCode,
      },
      { write: { task: after.task, execution: after.execution, steps, newSteps, attempts: [attemptRecord] } },
    );
    return issueContext(deps, after, activated, attemptRecord, true);
  });
}

export type Registrar =
  | { kind: 'coordinator'; principal: ApplicationPrincipal }
  | { kind: 'parent'; claims: ExecutionClaims };

/**
 * Registers a step that was not known at creation, under the task's dynamic registration policy. The
 * same clientStepKey + attempt returns the same execution instead of creating another.
 */
export async function registerExecution(
  deps: StatusDeps,
  registrar: Registrar,
  taskId: string,
  request: RegisterExecutionRequest,
): Promise<ExecutionContext> {
  return inFactTransaction(deps, async (session) => {
    const before = await session.lockTask(taskId);
    const applicationId =
      registrar.kind === 'coordinator' ? registrar.principal.applicationId : registrar.claims.applicationId;
    if (!before || before.task.applicationId !== applicationId)
      throw new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);
    if (before.task.finishedAt)
      throw new AppError(
        'INVALID_TRANSITION',
        `task ${taskId} ${alreadyEnded} ${before.task.lifecycleStatus}`,
      );
    const now = session.now;
    const attemptNumber = request.attempt ?? 1;
    const existing = before.steps.find(
      (s) => s.dynamic && s.clientStepKey === request.clientStepKey && s.attempt === attemptNumber,
    );
    if (existing?.attemptId) {
      const attempt = await session.tx.findAttempt(existing.attemptId);
      if (!attempt) throw new Error(`attempt ${existing.attemptId} is missing`);
      if (attempt.operationCode !== request.operationCode || attempt.producerId !== request.producerId) {
        throw new AppError(
          'IDEMPOTENCY_KEY_REUSED',
          `clientStepKey ${request.clientStepKey} attempt ${attemptNumber} was registered for ${attempt.operationCode} by ${attempt.producerId}`,
        );
      }
      return issueContext(deps, before, existing, attempt, false);
    }

    const policy = { ...defaultDynamicPolicy, ...before.task.dynamicPolicy };
    let parent: StepRecord | undefined;
    if (registrar.kind === 'parent') {
      if (
        registrar.claims.taskId !== taskId ||
        (request.parentExecutionId && request.parentExecutionId !== registrar.claims.executionId)
      ) {
        throw new AppError(
          'EXECUTION_CREDENTIAL_INVALID',
          'the credential is not the parent execution named in the request',
        );
      }
      parent = before.steps.find((s) => s.attemptId === registrar.claims.executionId);
      if (!parent?.current || stepIsFinished(parent.status)) {
        throw new AppError(
          'STALE_EXECUTION',
          `parent execution ${registrar.claims.executionId} is not a running current execution`,
        );
      }
      if (!policy.allowedParentOperations.some((p) => matchesPattern(p, parent!.operationCode))) {
        throw new AppError(
          'OPERATION_NOT_ALLOWED',
          `executions of ${parent.operationCode} may not register child steps on this task`,
        );
      }
    } else if (request.parentExecutionId) {
      parent = before.steps.find((s) => s.attemptId === request.parentExecutionId);
      if (!parent)
        throw new AppError(
          'STEP_NOT_REGISTERED',
          `parent execution ${request.parentExecutionId} is not part of task ${taskId}`,
        );
    }
    if (!policy.allowedChildOperations.some((p) => matchesPattern(p, request.operationCode))) {
      throw new AppError(
        'OPERATION_NOT_ALLOWED',
        `${request.operationCode} is not among the operations this task allows (${policy.allowedChildOperations.join(', ')})`,
      );
    }
    if (before.task.dynamicStepCount >= policy.maxDynamicSteps) {
      throw new AppError(
        'DYNAMIC_STEP_LIMIT',
        `task ${taskId} already has ${before.task.dynamicStepCount} dynamic steps (max ${policy.maxDynamicSteps})`,
      );
    }
    const depth = (parent?.depth ?? 0) + 1;
    if (depth > policy.maxDepth)
      throw new AppError('DYNAMIC_STEP_LIMIT', `nesting depth ${depth} exceeds ${policy.maxDepth}`);
    const active = before.steps.filter((s) => s.current && s.attemptId && !stepIsFinished(s.status)).length;
    if (active >= policy.maxParallelExecutions) {
      throw new AppError(
        'DYNAMIC_STEP_LIMIT',
        `task ${taskId} already has ${active} open executions (max ${policy.maxParallelExecutions})`,
      );
    }
    const recent = await session.tx.countRegistrationsSince(taskId, new Date(now.getTime() - 60_000));
    if (recent >= policy.registrationsPerMinute) {
      throw new AppError(
        'REGISTRATION_RATE_LIMITED',
        `task ${taskId} registered ${recent} steps in the last minute (max ${policy.registrationsPerMinute})`,
      );
    }
    const operation = await operationFor(deps, before, request.operationCode, request.producerId);
    const previous = before.steps.find(
      (s) => s.dynamic && s.clientStepKey === request.clientStepKey && s.current,
    );
    const step: StepRecord = {
      ...newStepRecord(
        deps.ids,
        taskId,
        before.execution.id,
        {
          key: `dyn_${request.clientStepKey}`,
          operationCode: request.operationCode,
          expectedProducer: request.producerId,
          dependsOn: [],
          failurePolicy: request.failurePolicy ?? operation?.failurePolicy ?? 'FAIL_TASK',
          displayName: request.displayName ?? null,
          heartbeatIntervalSeconds: request.heartbeatIntervalSeconds ?? null,
          heartbeatTimeoutSeconds: request.heartbeatTimeoutSeconds ?? null,
        },
        now,
      ),
      attempt: attemptNumber,
      clientStepKey: request.clientStepKey,
      dynamic: true,
      parentAttemptId: parent?.attemptId ?? null,
      depth,
      operationDefinitionVersion: operation?.version ?? null,
      status: 'QUEUED',
    };
    const attemptRecord = newAttempt(deps, before, step, request.producerId, operation, now);
    step.attemptId = attemptRecord.id;
    const superseded = previous ? [{ ...previous, current: false, updatedAt: now }] : [];
    const afterSteps = [...before.steps.map((s) => superseded.find((x) => x.id === s.id) ?? s), step];
    const moved = taskAfterStepChange(
      { ...before.task, dynamicStepCount: before.task.dynamicStepCount + 1 },
      before.execution,
      afterSteps,
      undefined,
      now,
    );
    const after: TaskState = { task: moved.task, execution: moved.execution, steps: afterSteps };
    await session.commit(
      before,
      after,
      {
        id: deps.ids.newId(),
        type: 'STEP_REGISTERED',
        producer:
          registrar.kind === 'coordinator' ? `application:${applicationId}` : registrar.claims.producerId,
        payload: {
          stepId: step.key,
          clientStepKey: request.clientStepKey,
          parentExecutionId: step.parentAttemptId,
          depth,
        },
        occurredAt: now,
        receivedAt: now,
        stepKey: step.key,
        stepAttempt: step.attempt,
        attemptId: attemptRecord.id,
        stepVersion: step.version,
        operationCode: step.operationCode,
      },
      {
        write: {
          task: after.task,
          execution: after.execution,
          newSteps: [step],
          steps: superseded,
          attempts: [attemptRecord],
        },
      },
    );
    return issueContext(deps, after, step, attemptRecord, true);
  });
}
