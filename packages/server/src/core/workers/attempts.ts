/**
 * Attempts and their execution context: the row that binds one execution instance of a step (its lease,
 * its handle, the events it may send), and what its producer is handed to report with (a signed token,
 * the compact handle, heartbeat settings). Pure record building through the credentials port: used by
 * placement (orchestration/placement.ts) when it starts a step's or a map item's attempt, and by the
 * status context when a coordinator activates or registers one.
 */
import type { ExecutionContext } from '@tdp/protocol';
import type { OperationDefinition } from '../definitions/ports.ts';
import type { AttemptRecord, StepRecord, TaskState } from '../facts/records.ts';
import { stepEventTypes } from '../facts/stateMachine.ts';
import type { SecretBox } from '../identity/secretBox.ts';
import type { IdGenerator } from '../shared/ports.ts';
import type { ExecutionClaims, ExecutionCredentials } from '../status/ports.ts';

export interface AttemptDeps {
  ids: IdGenerator;
  credentials: ExecutionCredentials;
  /** Seals compact handles so an idempotent re-activation can return the same handle. */
  secrets: SecretBox;
  /** How long an execution credential lives (it is also revoked when its step attempt ends). */
  credentialTtlMs: number;
  defaultHeartbeatIntervalSeconds: number;
  defaultHeartbeatTimeoutSeconds: number;
}

const handleField = (attemptId: string) => `attempt:${attemptId}:handle`;

/** Event types a producer of this operation may send: the registry's list, or every step event. */
export function allowedEventTypes(operation: OperationDefinition | null): string[] {
  return operation
    ? operation.allowedEventTypes.filter((t) => (stepEventTypes as readonly string[]).includes(t))
    : [...stepEventTypes];
}

export async function issueContext(
  deps: AttemptDeps,
  state: TaskState,
  step: StepRecord,
  attempt: AttemptRecord,
  created: boolean,
): Promise<ExecutionContext> {
  const claims: ExecutionClaims = {
    applicationId: state.task.applicationId,
    tenantId: state.task.tenantId,
    workflowId: state.task.workflowId,
    taskId: state.task.id,
    taskAttempt: state.execution.number,
    stepId: step.key,
    stepAttempt: step.attempt,
    executionId: attempt.id,
    operationCode: attempt.operationCode,
    producerId: attempt.producerId,
    allowedEventTypes: attempt.allowedEventTypes,
    expiresAt: attempt.expiresAt,
  };
  return {
    workflowId: state.task.workflowId,
    taskId: state.task.id,
    taskAttempt: state.execution.number,
    stepKey: step.key,
    stepId: step.key,
    stepAttempt: step.attempt,
    attemptId: attempt.id,
    executionId: attempt.id,
    operationCode: attempt.operationCode,
    operationDefinitionVersion: step.operationDefinitionVersion,
    producerId: attempt.producerId,
    allowedEventTypes: attempt.allowedEventTypes,
    executionToken: await deps.credentials.sign(claims),
    executionHandle: deps.secrets.open(attempt.handleSealed, handleField(attempt.id)),
    expiresAt: attempt.expiresAt.toISOString(),
    // A step's own heartbeat timeout leaves room for three beats (the default interval may be longer).
    heartbeatIntervalSeconds:
      step.heartbeatIntervalSeconds ??
      (step.heartbeatTimeoutSeconds
        ? Math.max(
            1,
            Math.min(deps.defaultHeartbeatIntervalSeconds, Math.floor(step.heartbeatTimeoutSeconds / 3)),
          )
        : deps.defaultHeartbeatIntervalSeconds),
    heartbeatTimeoutSeconds: step.heartbeatTimeoutSeconds ?? deps.defaultHeartbeatTimeoutSeconds,
    taskVersion: state.task.version.toString(),
    created,
  };
}

export function newAttempt(
  deps: AttemptDeps,
  state: TaskState,
  step: StepRecord,
  producerId: string,
  operation: OperationDefinition | null,
  at: Date,
  workerId: string | null = null,
  itemIndex: number | null = null,
): AttemptRecord {
  const id = deps.ids.newId();
  const { handle, hash } = deps.credentials.newHandle();
  return {
    id,
    taskId: state.task.id,
    stepId: step.id,
    applicationId: state.task.applicationId,
    operationCode: step.operationCode,
    producerId,
    allowedEventTypes: allowedEventTypes(operation),
    handleHash: hash,
    handleSealed: deps.secrets.seal(handle, handleField(id)),
    workerId,
    leaseVersion: 1,
    expiresAt: new Date(at.getTime() + deps.credentialTtlMs),
    revokedAt: null,
    createdAt: at,
    itemIndex,
  };
}
