/**
 * Reads of the status service: snapshots, the event timeline, batch status with known versions, a
 * user's tasks, a workflow with the task summaries its reader may see. (Granting access and attaching
 * external references are writes: access.ts.)
 */
import type { StructuredError, TaskEventView, TaskSummary, TaskWithExecution } from '@tdp/protocol';
import { summaryPayload, workflowPayload } from '../facts/projections.ts';
import type { TaskEventRecord, TaskState } from '../facts/records.ts';
import { shownUserMessage, toTaskView } from '../facts/views.ts';
import type { ApplicationPrincipal, Revocations } from '../identity/ports.ts';
import { withinReach } from '../identity/userReach.ts';
import type { ArchivedTasks } from '../retention/ports.ts';
import { AppError, archivedTaskError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import type { StatusReads, UserPrincipal } from './ports.ts';

export type Reader = ApplicationPrincipal | UserPrincipal;

export interface ReadDeps {
  reads: StatusReads;
  clock: Clock;
  ids: IdGenerator;
  /** Tombstones of archived tasks: a reader who could see one gets 410 TASK_ARCHIVED, not 404. */
  archived?: ArchivedTasks;
  /** A revoked view is announced to every replica (live subscriptions and watch sets drop the task). */
  revocations?: Pick<Revocations, 'announce'>;
}

/**
 * The task if the reader may see it: an API key, the tasks of its application; a user, as owner or
 * through the ACL, the tasks within their token's reach (core/identity/userReach.ts).
 */
export async function readableTask(deps: ReadDeps, reader: Reader, taskId: string): Promise<TaskState> {
  const state = await deps.reads.task(taskId);
  const visible =
    state &&
    (reader.kind === 'application'
      ? state.task.applicationId === reader.applicationId
      : withinReach(reader, state.task) && (await deps.reads.canView(taskId, reader.viewer)));
  if (!visible) {
    const tombstone = state ? null : await deps.archived?.find(taskId);
    // The owner (a user) or the application could read it before; anyone else learns nothing.
    const couldRead =
      tombstone &&
      (reader.kind === 'application'
        ? tombstone.applicationId === reader.applicationId
        : withinReach(reader, tombstone) && tombstone.ownerId === reader.viewer.userId);
    if (tombstone && couldRead) throw archivedTaskError(tombstone);
    throw new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);
  }
  return state;
}

export function toEventView(e: TaskEventRecord & { committedAt?: Date }): TaskEventView {
  const payload = { ...e.payload };
  if (payload.error && typeof payload.error === 'object') {
    // Neither the diagnostics reference nor the technical detail leaves the server (docs/errors.md).
    const {
      diagnosticsRef: _hidden,
      detail: _technical,
      ...error
    } = payload.error as Record<string, unknown>;
    if (typeof error.userMessage === 'string')
      error.userMessage = shownUserMessage(error as Pick<StructuredError, 'code' | 'userMessage'>);
    payload.error = error;
  }
  return {
    eventId: e.id,
    taskVersion: e.taskVersion.toString(),
    stepVersion: e.stepVersion?.toString() ?? null,
    eventType: e.type,
    stepKey: e.stepKey,
    stepId: e.stepKey,
    stepAttempt: e.stepAttempt,
    attemptId: e.attemptId,
    executionId: e.attemptId,
    operationCode: e.operationCode,
    producerId: e.producer,
    sourceSeq: e.sourceSeq?.toString() ?? null,
    lifecycleStatus: e.lifecycleStatus,
    businessStatus: e.businessStatus,
    health: e.health,
    phaseCode: e.phaseCode,
    dataSchema: e.dataSchema,
    errorCode: e.errorCode,
    occurredAt: e.occurredAt.toISOString(),
    receivedAt: e.receivedAt?.toISOString() ?? null,
    committedAt: (e.committedAt ?? e.receivedAt).toISOString(),
    durationMs: e.durationMs,
    payload,
  };
}

export async function taskEvents(
  deps: ReadDeps,
  reader: Reader,
  taskId: string,
  afterTaskVersion: bigint,
  limit: number,
) {
  const state = await readableTask(deps, reader, taskId);
  const oldest = state.task.eventsPrunedBefore;
  if (afterTaskVersion + 1n < oldest) {
    throw new AppError(
      'EVENTS_PRUNED',
      `events before task version ${oldest} were pruned; read the snapshot, then continue from afterTaskVersion=${oldest - 1n}`,
    );
  }
  const events = await deps.reads.events(taskId, afterTaskVersion, limit + 1);
  const page = events.slice(0, limit);
  return {
    taskId,
    items: page.map(toEventView),
    nextAfterTaskVersion: events.length > limit ? (page.at(-1)?.taskVersion.toString() ?? null) : null,
    oldestAvailableTaskVersion: oldest.toString(),
  };
}

/** Status of many tasks at once: unchanged ones (known version is current) come back without a body. */
export async function batchGet(
  deps: ReadDeps,
  reader: Reader,
  items: { taskId: string; knownVersion?: string | undefined }[],
) {
  const results = [];
  for (const item of items) {
    const state = await readableTask(deps, reader, item.taskId).catch(() => null);
    if (!state) {
      results.push({ taskId: item.taskId, found: false, changed: false, taskVersion: null });
      continue;
    }
    const changed = item.knownVersion === undefined || BigInt(item.knownVersion) < state.task.version;
    results.push({
      taskId: item.taskId,
      found: true,
      changed,
      taskVersion: state.task.version.toString(),
      ...(changed ? { snapshot: toTaskView(state) } : {}),
    });
  }
  return { items: results };
}

export function toSummary(state: TaskState): TaskSummary {
  const payload = summaryPayload(state, null);
  return {
    taskId: state.task.id,
    workflowId: state.task.workflowId,
    taskVersion: state.task.version.toString(),
    title: state.task.name,
    taskType: state.task.taskType,
    productId: state.task.productId,
    lifecycleStatus: state.task.lifecycleStatus,
    businessStatus: state.task.businessStatus,
    health: state.task.health,
    progressPercent: payload.progressPercent as number | null,
    error: payload.error as TaskSummary['error'],
    createdAt: state.task.createdAt.toISOString(),
    updatedAt: state.task.updatedAt.toISOString(),
    startedAt: state.task.startedAt?.toISOString() ?? null,
    finishedAt: state.task.finishedAt?.toISOString() ?? null,
  };
}

const encodeCursor = (state: TaskState) =>
  Buffer.from(`${state.task.updatedAt.toISOString()}|${state.task.id}`).toString('base64url');

function decodeCursor(cursor: string): { updatedAt: Date; id: string } {
  const [at, id] = Buffer.from(cursor, 'base64url').toString().split('|');
  const updatedAt = new Date(at ?? '');
  if (!id || Number.isNaN(updatedAt.getTime()))
    throw new AppError('VALIDATION_FAILED', 'cursor is not valid');
  return { updatedAt, id };
}

/** The tasks a user may see (owner or ACL), most recently updated first. */
export async function myTasks(
  deps: ReadDeps,
  user: UserPrincipal,
  query: { limit: number; cursor?: string | undefined },
) {
  const scope = {
    tenantId: user.tenantId,
    applicationId: user.userView === 'TENANT' ? null : user.applicationId,
  };
  const rows = await deps.reads.visibleTasks(scope, user.viewer, {
    limit: query.limit + 1,
    ...(query.cursor ? { before: decodeCursor(query.cursor) } : {}),
  });
  const page = rows.slice(0, query.limit);
  return {
    items: page.map(toSummary),
    nextCursor: rows.length > query.limit && page.length > 0 ? encodeCursor(page.at(-1)!) : null,
  };
}

/** A workflow with the summaries of the tasks its reader may see (a user only sees their tasks). */
export async function workflowView(deps: ReadDeps, reader: Reader, workflowId: string) {
  const workflow = await deps.reads.workflow(workflowId);
  const reachable =
    workflow &&
    (reader.kind === 'application'
      ? workflow.applicationId === reader.applicationId
      : withinReach(reader, workflow));
  if (!workflow || !reachable)
    throw new AppError('WORKFLOW_NOT_FOUND', `workflow ${workflowId} does not exist`);
  const tasks = await deps.reads.tasksOf(workflowId);
  const visible = reader.kind === 'application' ? tasks : await filterVisible(deps, reader, tasks);
  if (reader.kind === 'user' && visible.length === 0 && workflow.ownerId !== reader.viewer.userId) {
    throw new AppError('WORKFLOW_NOT_FOUND', `workflow ${workflowId} does not exist`);
  }
  return { workflow: workflowPayload(workflow), tasks: visible.map(toSummary) };
}

async function filterVisible(deps: ReadDeps, user: UserPrincipal, tasks: TaskState[]): Promise<TaskState[]> {
  const visible: TaskState[] = [];
  for (const state of tasks) if (await deps.reads.canView(state.task.id, user.viewer)) visible.push(state);
  return visible;
}

export type { TaskWithExecution };
