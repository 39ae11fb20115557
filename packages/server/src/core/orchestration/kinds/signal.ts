/**
 * The signal step waits for a named signal sent to its task (`POST /v1/tasks/{id}/signals/{name}`), or
 * its timeout. A signal sent before the step is reached is kept (a `task_signal` row) and taken when the
 * step begins; one sent while it waits ends the wait in the same transaction. Signals are taken oldest
 * first, one per step attempt.
 */
import type { SignalSent, StepDefinition } from '@tdp/protocol';
import type { JsonSchemaValidator } from '../../definitions/ports.ts';
import { isTerminal } from '../../facts/execution.ts';
import { operatorNamed, operatorProducer, operatorTaskActions } from '../../facts/operatorActor.ts';
import type { OperatorActor, StepRecord, TaskState } from '../../facts/records.ts';
import { type FactDeps, type FactSession, inFactTransaction } from '../../facts/session.ts';
import type { ApplicationPrincipal } from '../../identity/ports.ts';
import { fingerprint } from '../../shared/canonicalJson.ts';
import { AppError } from '../../shared/errors.ts';
import { type ConsequenceDeps, failStepAttempt } from '../consequences.ts';
import { completePlatformStep, stepTimer, stillWaiting, waitOnStep } from './finishStep.ts';

export async function beginSignal(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  definition: StepDefinition,
): Promise<void> {
  const now = session.now;
  const options = definition.signal!;
  const kept = await session.tx.takeSignal(before.task.id, options.name, step.id, now);
  if (kept) {
    await signalled(deps, session, before, step, kept.payload, `a signal ${options.name} sent earlier`);
    return;
  }
  const timeoutAt = options.timeoutMs !== undefined ? new Date(now.getTime() + options.timeoutMs) : null;
  await waitOnStep(
    deps,
    session,
    before,
    step,
    {
      kind: 'signal',
      name: options.name,
      since: now.toISOString(),
      ...(timeoutAt ? { timeoutAt: timeoutAt.toISOString() } : {}),
    },
    {
      producer: 'tdp:timer',
      milestone: 'WAITING_FOR_SIGNAL',
      message: `step ${step.key} waits for the signal ${options.name}`,
      timers: timeoutAt ? [stepTimer(deps, before, step, 'SIGNAL_TIMEOUT', timeoutAt, now)] : [],
    },
  );
}

/** SIGNAL_TIMEOUT: the wait ends without the signal; the step fails (its failure policy decides). */
export async function signalTimedOut(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord | undefined,
): Promise<void> {
  if (!stillWaiting(step, 'signal') || step.waitingFor?.kind !== 'signal') return;
  await failStepAttempt(deps, session, before, step, {
    producer: 'tdp:timer',
    error: {
      category: 'TIMEOUT',
      code: 'SIGNAL_TIMED_OUT',
      retryable: false,
      userMessage: `No ${step.waitingFor.name} signal arrived in time`,
    },
    infrastructure: false,
    workerId: null,
    milestone: 'TIMED_OUT',
  });
}

function signalled(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  payload: unknown,
  from: string,
  producer = 'tdp:signal',
) {
  return completePlatformStep(deps, session, before, step, payload ?? null, {
    producer,
    milestone: 'SIGNALLED',
    message: `step ${step.key} received ${from}`,
  });
}

/** Who sends a signal: an application (to its own tasks), or the operator (to any, with a reason). */
export type SignalSender =
  | { kind: 'application'; principal: ApplicationPrincipal }
  | { kind: 'operator'; reason: string; actor: OperatorActor };

/** Whose idempotency keys a signal's key is among: the application's, or the operators' (one space). */
const senderKey = (sender: SignalSender) =>
  sender.kind === 'operator' ? 'operator' : `application:${sender.principal.applicationId}`;
const producerOf = (sender: SignalSender) =>
  sender.kind === 'operator' ? operatorProducer(sender.actor) : senderKey(sender);

export interface SignalDeps extends FactDeps, ConsequenceDeps {
  schemas: JsonSchemaValidator;
}

export interface SendSignal {
  taskId: string;
  name: string;
  payload: unknown;
  idempotencyKey: string;
}

export interface SignalAnswer {
  status: 200 | 202;
  body: SignalSent;
}

const operation = 'task.signal';

/**
 * Sends a signal to a task of the caller's application (or, for the operator, any task). Idempotent by
 * key: the same key and body answer as the first time; the same key with another body is refused. A
 * payload the signal step's schema refuses is not kept. The operator's reason is kept with the fact.
 */
export async function sendSignal(
  deps: SignalDeps,
  sender: SignalSender,
  request: SendSignal,
): Promise<SignalAnswer> {
  const owner = senderKey(sender);
  const reason = sender.kind === 'operator' ? sender.reason : null;
  const requestHash = fingerprint({ name: request.name, payload: request.payload ?? null, reason });
  return inFactTransaction(deps, async (session) => {
    const before = await session.lockTask(request.taskId);
    if (
      !before ||
      (sender.kind === 'application' && before.task.applicationId !== sender.principal.applicationId)
    )
      throw new AppError('TASK_NOT_FOUND', `task ${request.taskId} does not exist`);
    const earlier = await session.tx.findIdempotency(
      owner,
      operation,
      `${request.taskId}:${request.idempotencyKey}`,
    );
    if (earlier) {
      if (earlier.requestHash !== requestHash)
        throw new AppError(
          'IDEMPOTENCY_KEY_REUSED',
          `Idempotency-Key "${request.idempotencyKey}" was used for a different signal; use a new key`,
        );
      return { status: 200, body: { ...(earlier.responseBody as SignalAnswer['body']), replayed: true } };
    }
    const steps = before.execution.snapshot.steps.filter((s) => s.signal?.name === request.name);
    if (steps.length === 0)
      throw new AppError(
        'SIGNAL_UNKNOWN',
        `the workflow of task ${request.taskId} has no signal step "${request.name}"`,
      );
    for (const step of steps) {
      const schema = step.signal!.payloadSchema;
      const problems = schema
        ? deps.schemas.validate(
            `${before.execution.snapshot.definitionId}:${step.key}`,
            schema,
            request.payload,
          )
        : [];
      if (problems.length > 0)
        throw new AppError(
          'SIGNAL_PAYLOAD_INVALID',
          problems.map((p) => `${p.path || '/'} ${p.message}`).join('; '),
          problems.map((p) => ({ path: `/payload${p.path}`, message: p.message })),
        );
    }
    if (isTerminal(before.execution.status))
      throw new AppError('INVALID_TRANSITION', `task ${request.taskId} has ended; it takes no more signals`);
    const now = session.now;
    const waiting = before.steps.find(
      (s) =>
        stillWaiting(s, 'signal') && s.waitingFor?.kind === 'signal' && s.waitingFor.name === request.name,
    );
    const signalId = deps.ids.newId();
    await session.tx.insertSignal(
      {
        id: signalId,
        taskId: request.taskId,
        name: request.name,
        payload: request.payload ?? null,
        createdAt: now,
      },
      waiting ? { stepId: waiting.id, at: now } : null,
    );
    const body: SignalAnswer['body'] = {
      signalId,
      taskId: request.taskId,
      name: request.name,
      consumedByStep: waiting?.key ?? null,
      replayed: false,
    };
    const idempotency = {
      principal: owner,
      operation,
      key: `${request.taskId}:${request.idempotencyKey}`,
      requestHash: requestHash,
      responseStatus: 202,
      responseBody: body,
      createdAt: now,
    };
    // The operator's signal is audited with the fact that records it.
    const operatorAudit =
      sender.kind === 'operator'
        ? [
            {
              id: deps.ids.newId(),
              action: operatorTaskActions.signal,
              subjectId: request.taskId,
              actor: sender.actor,
              reason: sender.reason,
              details: { signalId, name: request.name, consumedByStep: waiting?.key ?? null },
              tenantId: before.task.tenantId,
              taskId: request.taskId,
              createdAt: now,
            },
          ]
        : [];
    if (waiting) {
      const from = `the signal ${request.name}${sender.kind === 'operator' ? ` from operator ${sender.actor.name} (reason: ${sender.reason})` : ''}`;
      await signalled(deps, session, before, waiting, request.payload, from, producerOf(sender));
      await session.write({ idempotency, operatorAudit });
    } else {
      // Kept for the step; the task's log records its arrival.
      const after: TaskState = {
        ...before,
        task: { ...before.task, version: before.task.version + 1n, updatedAt: now },
      };
      await session.commit(
        before,
        after,
        {
          id: deps.ids.newId(),
          type: 'SIGNAL_RECEIVED',
          producer: producerOf(sender),
          payload: {
            signalId,
            name: request.name,
            ...(sender.kind === 'operator' ? { reason, operator: operatorNamed(sender.actor) } : {}),
          },
          occurredAt: now,
          receivedAt: now,
        },
        { write: { task: after.task, idempotency, operatorAudit } },
      );
    }
    return { status: 202, body };
  });
}
