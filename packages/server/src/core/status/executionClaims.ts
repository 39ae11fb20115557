/** Who an event's credential says is reporting: a token's claims, or what an attempt row vouches for. */
import type { AttemptRecord } from '../facts/records.ts';
import type { FactSession } from '../facts/session.ts';
import { type Refusal, refuse } from '../facts/stateMachine.ts';
import type { StatusDeps } from './deps.ts';
import type { ExecutionClaims } from './ports.ts';
import type { EventCredential } from './reportedEvents.ts';

export async function resolveExecution(
  deps: StatusDeps,
  session: FactSession,
  credential: EventCredential,
): Promise<ExecutionClaims | Refusal> {
  if (credential.kind === 'worker') return credential.claims;
  if (credential.kind === 'token') {
    const claims = await deps.credentials.verify(credential.token, session.now);
    return claims ?? refuse('EXECUTION_CREDENTIAL_INVALID', 'the execution token is invalid or expired');
  }
  if (credential.kind !== 'handle')
    return refuse('EXECUTION_CREDENTIAL_INVALID', 'step events need an execution credential');
  const attempt = await session.findAttemptByHandle(deps.credentials.hashHandle(credential.handle));
  if (
    !attempt ||
    attempt.applicationId !== credential.principal.applicationId ||
    attempt.expiresAt <= session.now
  ) {
    return refuse('EXECUTION_CREDENTIAL_INVALID', 'the execution handle is unknown, expired or not yours');
  }
  return claimsOfAttempt(attempt, credential.principal.tenantId);
}

/**
 * What an attempt row vouches for when its holder is known another way (a handle, a worker lease):
 * the fields a signed token would carry but the row does not are left empty and checked from the task.
 */
export function claimsOfAttempt(attempt: AttemptRecord, tenantId: string): ExecutionClaims {
  return {
    applicationId: attempt.applicationId,
    tenantId,
    workflowId: '',
    taskId: attempt.taskId,
    taskAttempt: 0,
    stepId: '',
    stepAttempt: 0,
    executionId: attempt.id,
    operationCode: attempt.operationCode,
    producerId: attempt.producerId,
    allowedEventTypes: attempt.allowedEventTypes,
    expiresAt: attempt.expiresAt,
  };
}
