import type { CreateTaskRequest, StepDefinition, TaskWithExecution } from '@tdp/protocol';
import {
  type DefinitionLookup,
  type JsonSchemaValidator,
  publishedWorkflow,
  requireValidInput,
  type StoredDefinition,
} from '../definitions/ports.ts';
import { applyScheduleToStart } from '../definitions/scheduleToStart.ts';
import { newTaskState, newWorkflowRecord, stepSpecsOf } from '../facts/newRecords.ts';
import { KeyTakenError } from '../facts/ports.ts';
import { workflowProjection } from '../facts/projections.ts';
import type {
  OrchestrationEngine,
  SchedulingRequestRecord,
  TaskState,
  WorkerCommandRecord,
} from '../facts/records.ts';
import { type FactDeps, type FactSession, inFactTransaction } from '../facts/session.ts';
import { toTaskView } from '../facts/views.ts';
import { checkOutboundUrl, type LiteralEgressCheck, refuseLiteralEgress } from '../identity/outboundUrl.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { inputMapItemsProblem, type MapItemLimits } from '../orchestration/kinds/mapItems.ts';
import { lockCandidates, type PlacementDeps, placeStep } from '../orchestration/placement.ts';
import {
  callbackFor,
  milestone,
  orchestrate,
  platformWorkerProducer,
} from '../orchestration/transitionRecords.ts';
import { fingerprint } from '../shared/canonicalJson.ts';
import { AppError, RetryLaterError } from '../shared/errors.ts';
import { noTracing, type TraceSpan } from '../shared/ports.ts';
import type { CandidateSource } from '../workers/ports.ts';
import { freeSlots, type WorkerCandidate } from '../workers/selector.ts';
import type { TaskStore, TasksInFlight } from './ports.ts';
import { applyStepConstraints } from './snapshot.ts';
import { type CreateAnswer, claimTaskKeys, debouncedSteps } from './taskKeys.ts';

export interface CreateTaskDeps extends FactDeps {
  /** The server's schedule-to-start limit for steps that set none (0 or absent: none). */
  scheduleToStartDefaultMs?: number;
  definitions: DefinitionLookup;
  schemas: JsonSchemaValidator;
  allowInsecureCallbacks: boolean;
  /** The egress policy, for refusing a callbackUrl on a refused address at once; absent: none at input. */
  egress?: LiteralEgressCheck;
  /** The engine new tasks are driven by (`TDP_ORCHESTRATOR`); absent: native. */
  engine?: OrchestrationEngine;
  /** Places the first steps in the creating transaction when fresh worker candidates are at hand. */
  placement?: InlinePlacement;
  /** The application's limit of unfinished tasks; absent: none. */
  inFlight?: InFlightLimit;
  /** The limits of map items, checked here when a map runs over the task's input. */
  mapItemLimits?: MapItemLimits;
  /** Reads the task as it stands now, for a replay's `current`; absent: a replay carries none. */
  tasks?: TaskStore;
  /** The cancel's grace for the task a debounce replaces (it has nothing on workers, so rarely used). */
  cancelGraceMs?: number;
}

export interface InFlightLimit {
  tasks: TasksInFlight;
  /** Unfinished tasks an application may have when it has no quota of its own (`0`: no limit). */
  limit: number;
  /** What the refusal's `Retry-After` says: when finished tasks may have made room. */
  retryAfterSeconds: number;
}

export interface InlinePlacement extends PlacementDeps {
  /** Called after the commit with the commands it wrote, for the workers' open streams. */
  wake: (commands: WorkerCommandRecord[]) => void;
  candidates: CandidateSource;
}

export interface CreateTaskResult {
  /** False the first time; true when the same request is replayed with the same key. */
  replayed: boolean;
  /** The creation's own answer, the same on every replay (with a debounce, what the create did). */
  body: CreateAnswer;
  /** A replay's view of the task now (null: archived since); kept apart so nobody mistakes one for the other. */
  current?: TaskWithExecution | null;
}

const operation = 'task.create';

/** What the create does when a field is left out (`priority ?? 50`, `input ?? {}`, no constraints). */
const defaultPriority = 50;

/**
 * The create's fingerprint: a documented default spelled out (`priority: 50`, `input: {}`,
 * `stepConstraints: {}`) is the same request as one that leaves it out, so its retry is a replay, not 409.
 */
function createRequestHash(request: CreateTaskRequest): string {
  const { priority, input, stepConstraints, ...rest } = request;
  return fingerprint({
    ...rest,
    ...(priority === defaultPriority ? {} : { priority }),
    ...(isEmptyObject(input) ? {} : { input }),
    ...(isEmptyObject(stepConstraints) ? {} : { stepConstraints }),
  });
}

function isEmptyObject(value: unknown): boolean {
  return (
    typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0
  );
}

/**
 * Accepts a task: validates it against the published workflow, freezes the definition into execution #1
 * and commits the idempotency record, the workflow (implicit unless named), the task, execution, steps,
 * TASK_CREATED (task version 1), the outbox event and the projections in one transaction. The platform is
 * the coordinator of such tasks. Replays with the same key and request return the original answer, and
 * beside it the task as it stands now.
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
    refuseLiteralEgress(deps.egress, request.callbackUrl, '/callbackUrl');
  }
  const definition = await publishedWorkflow(
    deps.definitions,
    principal.tenantId,
    request.workflowName,
    request.workflowVersion,
  );
  const input = request.input ?? {};
  requireValidInput(deps.schemas, definition, input);
  const merged = applyStepConstraints(definition.steps, request.stepConstraints);
  if (merged.errors.length > 0) {
    throw new AppError(
      'STEP_CONSTRAINTS_INVALID',
      merged.errors.map((e) => e.message).join('; '),
      merged.errors,
    );
  }
  if (deps.mapItemLimits) {
    const tooMany = inputMapItemsProblem(merged.steps, input, deps.mapItemLimits);
    if (tooMany) throw new AppError('MAP_ITEMS_LIMIT', tooMany);
  }
  const atLimit = deps.inFlight ? await overInFlight(deps.inFlight, principal.applicationId) : null;
  if (deps.inFlight && atLimit !== null) {
    // A retry of a create that was accepted is answered as always, at the limit too.
    const replayed = await replay(deps, principal, idempotencyKey, request);
    if (replayed) return replayed;
    throw new RetryLaterError(
      'TASKS_IN_FLIGHT_LIMIT',
      `the application has ${atLimit} unfinished tasks, its limit; retry once some have finished`,
      deps.inFlight.retryAfterSeconds,
    );
  }
  // Placing the roots at once takes a transaction that locks the free workers (`lockCandidates`): only
  // with a fresh snapshot that has a free worker. Otherwise a create without a workflow stays one write.
  const snapshot = deps.placement ? placeableSnapshot(deps.placement, deps.clock.now()) : null;
  const tracing = deps.tracing ?? noTracing;
  return tracing.inSpan('tdp.task.create', {}, (span) =>
    createInTransaction(
      deps,
      principal,
      idempotencyKey,
      request,
      definition,
      debouncedSteps(
        applyScheduleToStart(merged.steps, request.scheduleToStartMs, deps.scheduleToStartDefaultMs ?? 0),
        request.debounce?.windowMs,
      ),
      snapshot,
      span,
    ),
  );
}

/**
 * At the limit (the application's own quota, else the platform's), a create is refused before its
 * transaction (429, retry later): the limit it reached, or null. Counted outside it (and the count and
 * quota may be a second old, inFlightCounts.ts), so concurrent creates may pass the limit by a few: a
 * bound against a runaway client, not an exact count.
 */
async function overInFlight(inFlight: InFlightLimit, applicationId: string): Promise<number | null> {
  const { count, limit } = await inFlight.tasks.inFlight(applicationId, inFlight.limit);
  return limit > 0 && count >= limit ? limit : null;
}

/** The create's one transaction (its span's `traceparent` is kept in the execution's snapshot). */
async function createInTransaction(
  deps: CreateTaskDeps,
  principal: ApplicationPrincipal,
  idempotencyKey: string,
  request: CreateTaskRequest,
  definition: StoredDefinition,
  steps: StepDefinition[],
  snapshot: WorkerCandidate[] | null,
  span: TraceSpan,
): Promise<CreateTaskResult> {
  const requestHash = createRequestHash(request);
  const input = request.input ?? {};
  const traceparent = (deps.tracing ?? noTracing).traceparent();
  const idempotencyRecord = (responseStatus: number, responseBody: CreateAnswer, createdAt: Date) => ({
    principal: `application:${principal.applicationId}`,
    operation,
    key: idempotencyKey,
    requestHash,
    responseStatus,
    responseBody,
    createdAt,
  });
  return inFactTransaction(
    deps,
    async (session) => {
      const now = session.now;
      const workflow = request.workflowId
        ? await session.tx.lockWorkflow(request.workflowId)
        : newWorkflowRecord(
            deps.ids,
            {
              tenantId: principal.tenantId,
              applicationId: principal.applicationId,
              clientWorkflowKey: `task:${idempotencyKey}`,
              ownerId: request.ownerId ?? null,
              title: request.name.trim(),
              workflowType: null,
              requestHash,
              taskCount: 1,
            },
            now,
          );
      if (!workflow || workflow.applicationId !== principal.applicationId) {
        throw new AppError('WORKFLOW_NOT_FOUND', `workflow ${request.workflowId} does not exist`);
      }
      const created = newTaskState(
        deps.ids,
        {
          tenantId: principal.tenantId,
          applicationId: principal.applicationId,
          workflowId: workflow.id,
          clientTaskKey: request.workflowId ? `task:${idempotencyKey}` : 'task',
          name: request.name.trim(),
          ownerId: request.ownerId ?? null,
          definition: { id: definition.id, name: definition.name, version: definition.version },
          snapshot: {
            definitionId: definition.id,
            name: definition.name,
            version: definition.version,
            steps,
            ...(traceparent ? { traceparent } : {}),
            ...(deps.engine === 'temporal' ? { engine: deps.engine } : {}),
            // Its steps are placed only while it holds the key (placement.ts).
            ...(request.singleton?.whenRunning === 'wait'
              ? { singleton: { key: request.singleton.key } }
              : {}),
            // Its steps take fair turns with the key's, beside the application's other keys (fairShare.ts).
            ...(request.fairness
              ? { fairness: { key: request.fairness.key, weight: request.fairness.weight ?? 1 } }
              : {}),
          },
          steps: stepSpecsOf(steps, platformWorkerProducer),
          externalRef: request.externalRef ?? null,
          input,
          callbackUrl: request.callbackUrl ?? null,
          priority: request.priority ?? 50,
        },
        now,
      );
      const keys = await claimTaskKeys(
        { ...deps, cancelGraceMs: deps.cancelGraceMs ?? 0 },
        session,
        principal,
        request,
        created.task.id,
      );
      if (keys.kind === 'dropped') {
        // A debounce kept the task waiting with the key: nothing is created, the answer is that task.
        await session.write({ idempotency: idempotencyRecord(200, keys.answer, now) });
        return { replayed: false, body: keys.answer };
      }
      // The platform coordinates this task: the roots are ready at once, the application hears "created".
      const eventId = deps.ids.newId();
      const temporal = deps.engine === 'temporal';
      const createdMilestone = milestone(
        deps.ids,
        created,
        'CREATED',
        `execution #1 of ${definition.name}@${definition.version} created${temporal ? `, driven by Temporal workflow ${created.execution.id}` : ''}`,
        temporal ? { engine: 'temporal', workflowId: created.execution.id } : { engine: 'native' },
        now,
      );
      const started = orchestrate(deps.ids, created, { kind: 'EXECUTION_STARTED' }, now);
      const { state, callback } = callbackFor(deps.ids, started.state, eventId, 'execution.created', now);
      const implicit = !request.workflowId;
      await session.commit(
        null,
        state,
        {
          id: eventId,
          type: 'TASK_CREATED',
          producer: `application:${principal.applicationId}`,
          payload: {
            externalRef: state.task.externalRef,
            workflow: { name: definition.name, version: definition.version },
          },
          occurredAt: now,
          receivedAt: now,
        },
        {
          write: {
            newTask: { task: state.task, execution: state.execution },
            newSteps: state.steps,
            ...(implicit ? { newWorkflow: workflow } : {}),
            schedulingRequests: started.write.schedulingRequests ?? [],
            timers: started.write.timers ?? [],
            callbacks: callback ? [callback] : [],
            timeline: [createdMilestone, ...(started.write.timeline ?? [])],
          },
          extraRealtime: implicit ? [workflowProjection(workflow, () => deps.ids.newId(), now)] : [],
          countInWorkflow: !implicit,
        },
      );
      const placed =
        deps.placement && snapshot
          ? await placeRoots(
              deps.placement,
              session,
              state.task.id,
              started.write.schedulingRequests ?? [],
              snapshot,
            )
          : state;
      const body: CreateAnswer = {
        ...toTaskView(placed),
        ...(keys.debounce ? { debounce: keys.debounce } : {}),
        ...(keys.singleton ? { singleton: keys.singleton } : {}),
      };
      span.setAttributes({ taskId: state.task.id, executionId: state.execution.id, taskVersion: 1 });
      await session.write({ idempotency: idempotencyRecord(201, body, now) });
      return { replayed: false, body };
    },
    // Without a workflow to lock, roots to place or keys to take, a create reads nothing: one statement,
    // one round trip.
    {
      deferWrites: true,
      writeOnly: !request.workflowId && snapshot === null && !request.debounce && !request.singleton,
    },
  ).catch(async (error: unknown) => {
    // The key was taken (maybe by a concurrent request whose commit the insert waited for), or its
    // implicit workflow was (same key, so same request or a reuse): nothing was written; a replay.
    if (!(error instanceof KeyTakenError)) throw error;
    return (await replay(deps, principal, idempotencyKey, request)) ?? Promise.reject(error);
  });
}

/**
 * Places the ready roots of a task being created on workers chosen from the fresh snapshot, as the
 * scheduler would (placement.ts: same lock, selector, attempt, command and milestone), so the workers
 * hear of it when the create commits. Without a snapshot, for a delayed step, or for a step no worker
 * can take, the step keeps its scheduling request. Returns the task as it stands afterwards.
 */
async function placeRoots(
  placement: InlinePlacement,
  session: FactSession,
  taskId: string,
  requests: SchedulingRequestRecord[],
  snapshot: WorkerCandidate[],
): Promise<TaskState> {
  // A delayed step waits for its time in the scheduler's queue.
  const due = requests.filter((r) => r.availableAt.getTime() <= session.now.getTime());
  if (due.length > 0) {
    // One worker for these steps, the least loaded free one no other placer holds, locked without
    // waiting (so concurrent creates spread over the workers); a step it cannot take keeps its request
    // for the scheduler.
    const capabilities = await capabilitiesOf(session, taskId, due);
    const candidates = await lockCandidates(placement, session, snapshot, {
      mode: 'firstFree',
      capabilities,
    });
    const commands: WorkerCommandRecord[] = [];
    for (const request of due) {
      const before = await session.lockTask(taskId);
      const result = await placeStep(placement, session, before, request.stepId, candidates, false);
      if (result.kind === 'placed') commands.push(result.command);
    }
    if (commands.length > 0) session.afterCommit(() => placement.wake(commands));
  }
  return (await session.lockTask(taskId))!;
}

/** The fresh snapshot if some worker in it has a free slot, else null. */
function placeableSnapshot(placement: InlinePlacement, now: Date): WorkerCandidate[] | null {
  const snapshot = placement.candidates.current();
  return snapshot && freeSlots(snapshot, now, placement.heartbeatTtlMs) > 0 ? snapshot : null;
}

async function capabilitiesOf(session: FactSession, taskId: string, requests: SchedulingRequestRecord[]) {
  const state = await session.lockTask(taskId);
  const stepIds = new Set(requests.map((r) => r.stepId));
  return [...new Set((state?.steps ?? []).filter((s) => stepIds.has(s.id)).map((s) => s.capability))];
}

/**
 * The first answer to this key, with the task as it stands now. The key is the application's own, so the
 * task holding it is always the caller's to see: a reuse's 409 names it.
 */
async function replay(
  deps: CreateTaskDeps,
  principal: ApplicationPrincipal,
  key: string,
  request: CreateTaskRequest,
): Promise<CreateTaskResult | null> {
  const existing = await deps.store.transaction((tx) =>
    tx.findIdempotency(`application:${principal.applicationId}`, operation, key),
  );
  if (!existing) return null;
  const body = existing.responseBody as CreateAnswer;
  // Records kept from before defaults were normalised hash the request as it was sent.
  const same =
    existing.requestHash === createRequestHash(request) || existing.requestHash === fingerprint(request);
  if (!same) {
    throw new AppError(
      'IDEMPOTENCY_KEY_REUSED',
      `Idempotency-Key "${key}" was used for a different request, which created task ${body.task.id}; ` +
        'use a new key for a new task',
    );
  }
  if (!deps.tasks) return { replayed: true, body };
  const now = await deps.tasks.getTask(principal.applicationId, body.task.id);
  return { replayed: true, body, current: now ? toTaskView(now) : null };
}
