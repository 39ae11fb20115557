/**
 * `reportTaskEvent`: the one application service every fact of a producer or coordinator goes through
 * (REST single, REST batch; other adapters later). Adapters only authenticate and decode.
 *
 * Validation chain, in order: credential → dedup by eventId (a retry gets the first answer even after
 * the step ended) → step registry → operation and producer → current attempt and execution → allowed
 * event types → data.schema in the operation's registry and JSON Schema valid → sourceSeq per step
 * attempt and producer → state machine → business status in the bound status definition. Then one
 * commit on the fact path.
 */
import type { EventResult } from '@tdp/protocol';
import { matchesPattern } from '../definitions/patterns.ts';
import type { AttemptRecord, StepRecord, TaskState } from '../facts/records.ts';
import { type FactSession, inFactTransaction } from '../facts/session.ts';
import {
  applyStepEvent,
  checkBusinessStatus,
  isRefusal,
  type Refusal,
  type StepEventType,
  stepIsFinished,
  stoppedByCancel,
  taskAfterStepChange,
} from '../facts/stateMachine.ts';
import type { FactWriteSet } from '../facts/writeSet.ts';
import { cancelIfStopped, finishTask } from '../orchestration/consequences.ts';
import {
  callbackFor,
  isPlatformTask,
  orchestrate,
  stepsToWrite,
} from '../orchestration/transitionRecords.ts';
import { AppError } from '../shared/errors.ts';
import { reportCoordinatorEvent } from './coordinatorEvents.ts';
import type { StatusDeps } from './deps.ts';
import { resolveExecution } from './executionClaims.ts';
import type { ExecutionClaims } from './ports.ts';
import {
  eventPayload,
  mismatch,
  payloadHash,
  platformOutputSchema,
  type ReportItem,
  type ReportOutcome,
} from './reportedEvents.ts';

const coordinatorEvents = new Set(['TASK_COMPLETED', 'TASK_FAILED']);
/** Validates and commits one event inside the session; a refusal throws AppError and writes nothing. */
async function reportOne(deps: StatusDeps, session: FactSession, item: ReportItem): Promise<EventResult> {
  const { event, credential } = item;
  const now = session.now;
  const hash = payloadHash(event);
  const fail = (r: Refusal): never => {
    throw new AppError(r.code, r.message);
  };

  let claims: ExecutionClaims | null = null;
  let taskId: string;
  if (credential.kind === 'coordinator') {
    if (!coordinatorEvents.has(event.eventType)) {
      throw new AppError(
        'EVENT_TYPE_NOT_ALLOWED',
        `${event.eventType} must be reported with the step's execution credential`,
      );
    }
    if (!event.taskId) throw new AppError('VALIDATION_FAILED', 'taskId is required');
    taskId = event.taskId;
  } else {
    const resolved = await resolveExecution(deps, session, credential);
    if (isRefusal(resolved)) fail(resolved);
    claims = resolved as ExecutionClaims;
    taskId = claims.taskId;
  }

  // The dedup read goes out right behind the lock, so it runs once the lock is held.
  const [before, seen] = await Promise.all([session.lockTask(taskId), session.findDedup(event.eventId)]);
  const applicationId =
    credential.kind === 'token' || credential.kind === 'worker'
      ? claims!.applicationId
      : credential.principal.applicationId;
  if (!before || before.task.applicationId !== applicationId)
    throw new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);

  // A retry of an accepted event gets the first answer back, whatever happened since.
  if (seen) {
    if (seen.taskId === taskId && seen.payloadHash === hash) {
      const first = seen.result as unknown as EventResult;
      // An answer stored before `stepKey` was added carries only the deprecated `stepId`.
      return { ...first, stepKey: first.stepKey ?? first.stepId, duplicate: true };
    }
    throw new AppError(
      'EVENT_ID_CONFLICT',
      `eventId ${event.eventId} was already used with different content`,
    );
  }
  if (mismatch(event.taskId, taskId) || mismatch(event.workflowId, before.task.workflowId)) {
    throw new AppError(
      'EXECUTION_CREDENTIAL_INVALID',
      'the event names another task or workflow than its credential',
    );
  }
  if (mismatch(event.taskAttempt, before.execution.number)) {
    throw new AppError(
      'STALE_EXECUTION',
      `task attempt ${event.taskAttempt} is not the current one (${before.execution.number})`,
    );
  }
  const statusDefinition = await deps.registries.statusDefinition(
    before.task.applicationId,
    before.task.taskType,
    before.task.statusDefinitionVersion,
  );
  if (mismatch(event.taskType, before.task.taskType)) {
    throw new AppError(
      'VALIDATION_FAILED',
      `taskType ${event.taskType} is not the task's (${before.task.taskType ?? 'unclassified'})`,
    );
  }

  if (!claims) return reportCoordinatorEvent(session, before, event, hash, statusDefinition);

  // Step registry, operation and producer.
  const step = before.steps.find((s) => s.attemptId === claims!.executionId);
  if (!step && (await session.findAttempt(claims.executionId))) {
    throw new AppError(
      'STALE_EXECUTION',
      `execution ${claims.executionId} belongs to an earlier run of task ${taskId}`,
    );
  }
  if (!step) {
    const keyed = before.steps.find((s) => s.key === event.stepId);
    throw new AppError(
      keyed ? 'STALE_EXECUTION' : 'STEP_NOT_REGISTERED',
      keyed
        ? `execution ${claims.executionId} belongs to an earlier run of task ${taskId}`
        : `step ${event.stepId ?? claims.stepId} is not registered on task ${taskId}`,
    );
  }
  if (
    mismatch(event.stepId, step.key) ||
    mismatch(event.stepAttempt, step.attempt) ||
    mismatch(event.executionId, step.attemptId)
  ) {
    throw new AppError(
      'EXECUTION_CREDENTIAL_INVALID',
      `the credential is for step ${step.key} attempt ${step.attempt} (execution ${step.attemptId})`,
    );
  }
  if (claims.operationCode !== step.operationCode || mismatch(event.operationCode, step.operationCode)) {
    throw new AppError(
      'OPERATION_MISMATCH',
      `step ${step.key} runs ${step.operationCode}, not ${event.operationCode ?? claims.operationCode}`,
    );
  }
  if (
    mismatch(event.producerId, claims.producerId) ||
    (step.expectedProducer !== null && !matchesPattern(step.expectedProducer, claims.producerId))
  ) {
    throw new AppError(
      'PRODUCER_MISMATCH',
      `step ${step.key} is reported by ${claims.producerId}, not ${event.producerId ?? claims.producerId}`,
    );
  }
  if (!step.current)
    throw new AppError(
      'STALE_EXECUTION',
      `step ${step.key} attempt ${step.attempt} was superseded by a newer attempt`,
    );
  if (!claims.allowedEventTypes.includes(event.eventType)) {
    throw new AppError(
      'EVENT_TYPE_NOT_ALLOWED',
      `this execution may report ${claims.allowedEventTypes.join(', ')}, not ${event.eventType}`,
    );
  }
  // Registered data schema; TDP's own workers report capability output as `tdp.output.v1`.
  if (event.data && !(credential.kind === 'worker' && event.data.schema === platformOutputSchema)) {
    const operation = await deps.registries.operationDefinition(
      before.task.applicationId,
      step.operationCode,
      step.operationDefinitionVersion,
    );
    const schema = operation?.dataSchemas[event.data.schema];
    if (!operation || !schema?.eventTypes.includes(event.eventType)) {
      throw new AppError(
        'SCHEMA_NOT_ALLOWED',
        `data.schema ${event.data.schema} is not registered for ${step.operationCode} ${event.eventType}`,
      );
    }
    const errors = deps.schemas.validate(
      `op:${operation.applicationId}:${operation.operationCode}:${operation.version}:${event.data.schema}`,
      schema.jsonSchema,
      event.data.value,
    );
    if (errors.length > 0) {
      throw new AppError(
        'DATA_INVALID',
        `data.value does not match ${event.data.schema}: ${errors.map((e) => `${e.path || '/'} ${e.message}`).join('; ')}`,
        errors.map((e) => ({ path: `/data/value${e.path}`, message: e.message })),
      );
    }
  }
  const lastSeq = step.sourceSeqs[claims.producerId] ?? 0;
  if (event.sourceSeq <= lastSeq) {
    throw new AppError(
      'SOURCE_SEQ_REGRESSION',
      `sourceSeq ${event.sourceSeq} is not above ${lastSeq}, the last accepted from ${claims.producerId} for step ${step.key} attempt ${step.attempt}`,
    );
  }
  const changed = applyStepEvent(
    step,
    { ...event, eventType: event.eventType as StepEventType, producerId: claims.producerId },
    now,
  );
  if (isRefusal(changed)) fail(changed);
  const cancelling = before.execution.status === 'CANCELLING';
  const nextStep = cancelling ? stoppedByCancel(changed as StepRecord) : (changed as StepRecord);
  const businessRefusal = checkBusinessStatus(
    statusDefinition,
    before.task.businessStatus,
    event.businessStatus,
    event.eventType as StepEventType,
  );
  if (businessRefusal) fail(businessRefusal);

  const steps = before.steps.map((s) => (s.id === step.id ? nextStep : s));
  const moved = taskAfterStepChange(before.task, before.execution, steps, event.businessStatus, now);
  let after: TaskState = { task: moved.task, execution: moved.execution, steps };
  const ended = stepIsFinished(nextStep.status);
  const platform = isPlatformTask(after);
  // TDP coordinates its own tasks: what follows this fact is decided and written in the same transaction.
  const orchestrated =
    platform && ended && !cancelling
      ? orchestrate(
          deps.ids,
          after,
          nextStep.status === 'SUCCEEDED'
            ? { kind: 'STEP_SUCCEEDED', stepKey: step.key }
            : {
                kind: 'STEP_FAILED',
                stepKey: step.key,
                errorCode: nextStep.error?.code ?? 'STEP_FAILED',
                retryable: nextStep.error?.retryable ?? false,
                // Category WORKER: the worker handed the attempt back (draining, restarted) — not the
                // step's failure, so it is retried like a lost worker's, under every failure policy.
                infrastructure: nextStep.error?.category === 'WORKER',
              },
          now,
        )
      : null;
  if (orchestrated) after = orchestrated.state;
  const executionMoved =
    after.execution.status !== before.execution.status ||
    after.execution.progress !== before.execution.progress;
  const notified =
    platform && executionMoved
      ? callbackFor(
          deps.ids,
          after,
          event.eventId,
          after.execution.status !== before.execution.status
            ? `execution.${after.execution.status.toLowerCase()}`
            : 'execution.progress',
          now,
        )
      : null;
  if (notified) after = notified.state;
  const { result } = await session.commit(
    before,
    after,
    {
      id: event.eventId,
      type: event.eventType,
      producer: claims.producerId,
      payload: eventPayload(event),
      occurredAt: event.occurredAt ? new Date(event.occurredAt) : now,
      receivedAt: now,
      stepKey: step.key,
      stepAttempt: step.attempt,
      attemptId: step.attemptId,
      stepVersion: nextStep.version,
      operationCode: step.operationCode,
      sourceSeq: event.sourceSeq,
      phaseCode: event.phaseCode ?? null,
      dataSchema: event.data?.schema ?? null,
      errorCode: nextStep.error && event.eventType === 'STEP_FAILED' ? nextStep.error.code : null,
      durationMs: event.durationMs ?? null,
    },
    {
      dedupHash: hash,
      statusDefinition,
      write: {
        task: after.task,
        ...(after.execution !== before.execution ? { execution: after.execution } : {}),
        steps: stepsToWrite(nextStep, orchestrated),
        ...(orchestrated ? { ...orchestrated.write, newSteps: orchestrated.write.newSteps ?? [] } : {}),
        revokeAttemptIds: [
          ...(ended && step.attemptId ? [step.attemptId] : []),
          ...(orchestrated?.write.revokeAttemptIds ?? []),
        ],
        ...(notified?.callback ? { callbacks: [notified.callback] } : {}),
      },
    },
  );
  if (orchestrated?.end) await finishTask(deps, session, after, orchestrated.end);
  if (platform && ended && cancelling) await cancelIfStopped(deps, session, after);
  return result;
}

/** One event, in its own transaction; a refusal is thrown as the AppError the API answers with. */
export async function reportTaskEvent(deps: StatusDeps, item: ReportItem): Promise<EventResult> {
  return inFactTransaction(deps, (session) => reportOne(deps, session, item));
}

/**
 * A batch in one transaction: each item is validated and committed on its own (a refused item writes
 * nothing and does not stop the others) and gets its own result. Items are applied in task-id order
 * (keeping the given order within a task) so concurrent batches take task locks in the same order.
 */
export async function reportTaskEvents(
  deps: StatusDeps,
  items: ReportItem[],
  options: {
    /** Attempt rows the caller already read. */
    attempts?: AttemptRecord[];
    /** Commands the reporting worker acknowledged with these events, written in the same commit. */
    commandAcks?: FactWriteSet['commandAcks'];
  } = {},
): Promise<ReportOutcome[]> {
  const outcomes: ReportOutcome[] = new Array(items.length);
  const attempts = new Map((options.attempts ?? []).map((a) => [a.id, a]));
  const knownTaskOf = (item: ReportItem) =>
    item.credential.kind === 'worker'
      ? (attempts.get(item.credential.claims.executionId)?.taskId ?? null)
      : (item.event.taskId ?? null);
  const order = items.map((item, index) => ({ item, index, key: taskKeyOf(item, knownTaskOf(item)) }));
  order.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.index - b.index));
  await inFactTransaction(
    deps,
    async (session) => {
      session.rememberAttempts([...attempts.values()]);
      // Execution handles resolve to their attempts in one read, so their tasks are known up front too.
      const hashes = items.map((item) =>
        item.credential.kind === 'handle' ? deps.credentials.hashHandle(item.credential.handle) : null,
      );
      const resolved = await session.resolveHandles(hashes.filter((h): h is Buffer => h !== null));
      let nextResolved = 0;
      const taskIds = items.map((item, i) =>
        hashes[i] ? (resolved[nextResolved++]?.taskId ?? null) : knownTaskOf(item),
      );
      // Tasks whose ids are known up front are locked (in id order) and read with the dedup records in one go.
      // Their workflows too when every task is known (no task is then locked after a workflow) and the
      // batch is likely to move a task's lifecycle: a batch of progress reports rarely does, and locking
      // a workflow row writes it. A workflow not locked here is locked at the end, after all the tasks.
      await session.prefetch(
        taskIds.filter((id): id is string => id !== null),
        items.map((i) => i.event.eventId),
        {
          workflows:
            taskIds.every((id) => id !== null) && items.some((i) => i.event.eventType !== 'STEP_PROGRESS'),
        },
      );
      for (const { item, index } of order) {
        try {
          outcomes[index] = { ok: true, result: await reportOne(deps, session, item) };
        } catch (error) {
          if (!(error instanceof AppError)) throw error;
          outcomes[index] = { ok: false, error };
        }
      }
      if (options.commandAcks) await session.write({ commandAcks: options.commandAcks });
    },
    { deferWrites: true },
  );
  return outcomes;
}

/** Best-effort task id for lock ordering (tokens and handles resolve inside the transaction). */
function taskKeyOf(item: ReportItem, taskId: string | null): string {
  return taskId ?? (item.credential.kind === 'handle' ? `~${item.credential.handle}` : '~');
}
