/**
 * Realtime projections (docs/realtime.md): each built from the validated current state through a field
 * whitelist — never from a producer's raw JSON, so nothing the whitelist does not name reaches a browser.
 * Summaries carry no step data, inputs or
 * diagnostics; details carry steps and their registered data; workflow summaries carry only counts.
 */
import type { LifecycleStatus } from '@tdp/protocol';
import type {
  AclEntry,
  RealtimeRecord,
  StatusDefinition,
  StepRecord,
  TaskEventRecord,
  TaskState,
  WorkflowRecord,
} from './records.ts';
import { publicError, shownUserMessage, stepLifecycle } from './views.ts';

/**
 * Summary channels are per application (`<tenant>/<application>/<principal>`): a token of one application
 * names only its own, and one whose tenant gave it the tenant-wide user view names those of every
 * application of the tenant (core/identity/userReach.ts).
 */
export const channels = {
  user: (tenantId: string, applicationId: string, userId: string) =>
    `task_user:${tenantId}/${applicationId}/${userId}`,
  project: (tenantId: string, applicationId: string, projectId: string) =>
    `task_project:${tenantId}/${applicationId}/${projectId}`,
  role: (tenantId: string, applicationId: string, roleId: string) =>
    `task_role:${tenantId}/${applicationId}/${roleId}`,
  detail: (tenantId: string, taskId: string) => `task_detail:${tenantId}/${taskId}`,
  workflow: (tenantId: string, workflowId: string) => `workflow_summary:${tenantId}/${workflowId}`,
  /** Every task's summary, for the operator dashboard (its tokens come only from an operator session). */
  operator: 'task_ops:all',
  /** One tenant's task summaries, for the operators whose roles are bound to that tenant. */
  operatorTenant: (tenantId: string) => `task_ops:${tenantId}`,
  /** Notices to every person of a tenant, and to everyone (core/realtime/broadcasts.ts). */
  tenant: (tenantId: string) => `task_tenant:${tenantId}`,
  system: 'task_system:public',
};

/** Who an operator's live connection is (its token's `sub`): `operator:<id>`, or `operator:bootstrap`. */
export const operatorSubject = (operatorId: string | null) => `operator:${operatorId ?? 'bootstrap'}`;

export interface Notice {
  id: string;
  kind:
    | 'TASK_SUCCEEDED'
    | 'TASK_FAILED'
    | 'TASK_CANCELLED'
    | 'TASK_TIMED_OUT'
    | 'STEP_FAILED'
    | 'ACTION_REQUIRED';
  severity: 'INFO' | 'WARNING' | 'ERROR' | 'ACTION_REQUIRED';
  message: string;
  /** Set on the notice that asks its reader to act (an approval waiting for them). */
  requiresAction?: true;
}

/** A notice for some of the task's summary channels only (e.g. an approval's approvers). */
export interface ChannelNotice {
  notice: Notice;
  channels: string[];
}

const terminalNotice: Partial<Record<LifecycleStatus, Pick<Notice, 'kind' | 'severity'>>> = {
  SUCCEEDED: { kind: 'TASK_SUCCEEDED', severity: 'INFO' },
  FAILED: { kind: 'TASK_FAILED', severity: 'ERROR' },
  CANCELLED: { kind: 'TASK_CANCELLED', severity: 'WARNING' },
  TIMED_OUT: { kind: 'TASK_TIMED_OUT', severity: 'ERROR' },
};

/** A notice for failures, terminal states and action-required states; its id is `taskId:taskVersion`. */
export function noticeFor(
  before: TaskState | null,
  after: TaskState,
  event: TaskEventRecord,
  statusDefinition: StatusDefinition | null,
): Notice | null {
  const id = `${after.task.id}:${after.task.version}`;
  const title = after.task.name;
  const ended =
    before?.task.lifecycleStatus !== after.task.lifecycleStatus
      ? terminalNotice[after.task.lifecycleStatus]
      : undefined;
  if (ended) {
    const failureMessage = shownUserMessage(after.task.failure);
    const reason = failureMessage ? `: ${failureMessage}` : '';
    return {
      id,
      ...ended,
      message: `${title} ${after.task.lifecycleStatus.toLowerCase().replace('_', ' ')}${reason}`,
    };
  }
  if (event.type === 'STEP_FAILED') {
    const step = after.steps.find((s) => s.attemptId === event.attemptId);
    const message = shownUserMessage(step?.error ?? null) ?? `step ${event.stepKey} failed`;
    return {
      id,
      kind: 'STEP_FAILED',
      severity: step?.failurePolicy === 'CONTINUE_WITH_WARNING' ? 'WARNING' : 'ERROR',
      message,
    };
  }
  const entry = statusDefinition?.statuses.find((s) => s.code === after.task.businessStatus);
  if (entry?.severity === 'ACTION_REQUIRED' && before?.task.businessStatus !== after.task.businessStatus) {
    return {
      id,
      kind: 'ACTION_REQUIRED',
      severity: 'ACTION_REQUIRED',
      message: `${title}: ${entry.displayName}`,
    };
  }
  return null;
}

function taskProgressPercent(state: TaskState): number | null {
  return state.execution.status === 'CREATED' ? null : state.execution.progress;
}

export function summaryPayload(state: TaskState, notice: Notice | null): Record<string, unknown> {
  const { task } = state;
  return {
    kind: 'task.summary',
    schemaVersion: 1,
    taskId: task.id,
    workflowId: task.workflowId,
    taskVersion: task.version.toString(),
    title: task.name,
    taskType: task.taskType,
    productId: task.productId,
    lifecycleStatus: task.lifecycleStatus,
    businessStatus: task.businessStatus,
    health: task.health,
    progressPercent: taskProgressPercent(state),
    error: task.failure ? { code: task.failure.code, userMessage: shownUserMessage(task.failure) } : null,
    createdAt: task.createdAt.toISOString(),
    updatedAt: task.updatedAt.toISOString(),
    startedAt: task.startedAt?.toISOString() ?? null,
    finishedAt: task.finishedAt?.toISOString() ?? null,
    notice,
  };
}

function stepDetail(step: StepRecord) {
  return {
    stepKey: step.key,
    /** @deprecated use stepKey */
    stepId: step.key,
    attempt: step.attempt,
    attemptId: step.attemptId,
    /** @deprecated use attemptId */
    executionId: step.attemptId,
    operationCode: step.operationCode,
    displayName: step.displayName,
    dynamic: step.dynamic,
    dependsOn: step.dependsOn,
    lifecycleStatus: stepLifecycle(step.status),
    status: step.status,
    businessStatus: step.businessStatus,
    phaseCode: step.phaseCode,
    phaseLabel: step.phaseLabel,
    progress: step.progress,
    health: step.health,
    stepVersion: step.version.toString(),
    dataSchema: step.dataSchema,
    data: step.stateData ?? null,
    error: publicError(step.error),
    startedAt: step.startedAt?.toISOString() ?? null,
    finishedAt: step.finishedAt?.toISOString() ?? null,
    durationMs: step.durationMs,
    reusedFromExecutionId: step.reusedFromExecutionId,
    waitingFor: step.waitingFor,
  };
}

export function detailPayload(
  state: TaskState,
  event: TaskEventRecord,
  notice: Notice | null,
  committedAt: Date,
): Record<string, unknown> {
  const { task } = state;
  const trigger = state.steps.find((s) => s.attemptId !== null && s.attemptId === event.attemptId);
  return {
    kind: 'task.detail',
    schemaVersion: 1,
    taskId: task.id,
    workflowId: task.workflowId,
    taskVersion: task.version.toString(),
    triggerEvent: {
      eventId: event.id,
      eventType: event.type,
      stepKey: event.stepKey,
      /** @deprecated use stepKey */
      stepId: event.stepKey,
      attemptId: event.attemptId,
      operationCode: event.operationCode,
      durationMs: event.durationMs,
      dataSchema: event.dataSchema,
      data: trigger && event.dataSchema ? (trigger.stateData ?? null) : null,
      committedAt: committedAt.toISOString(),
    },
    state: {
      title: task.name,
      parentTaskId: task.parentTaskId,
      taskType: task.taskType,
      productId: task.productId,
      lifecycleStatus: task.lifecycleStatus,
      businessStatus: task.businessStatus,
      health: task.health,
      progressPercent: taskProgressPercent(state),
      failure: task.failure
        ? { ...publicError(task.failure), failedStepId: task.failure.failedStepId }
        : null,
      createdAt: task.createdAt.toISOString(),
      startedAt: task.startedAt?.toISOString() ?? null,
      finishedAt: task.finishedAt?.toISOString() ?? null,
      asOf: committedAt.toISOString(),
      steps: state.steps.filter((s) => s.current).map(stepDetail),
    },
    notice,
  };
}

export function workflowPayload(workflow: WorkflowRecord): Record<string, unknown> {
  return {
    kind: 'workflow.summary',
    schemaVersion: 1,
    workflowId: workflow.id,
    workflowVersion: workflow.version.toString(),
    title: workflow.title,
    workflowType: workflow.workflowType,
    lifecycleStatus: workflow.lifecycleStatus,
    taskCount: workflow.taskCount,
    taskCounts: workflow.taskCounts,
    updatedAt: workflow.updatedAt.toISOString(),
  };
}

/** The summary channel of one principal of a task's ACL. */
export function aclChannel(
  tenantId: string,
  applicationId: string,
  type: AclEntry['principalType'],
  id: string,
): string {
  if (type === 'USER') return channels.user(tenantId, applicationId, id);
  if (type === 'PROJECT') return channels.project(tenantId, applicationId, id);
  return channels.role(tenantId, applicationId, id);
}

/** The channels that see a task's summary: its owner and every principal of its live ACL. */
export function summaryChannels(state: TaskState, acl: AclEntry[]): string[] {
  const { tenantId, applicationId, ownerId } = state.task;
  const list = new Set<string>();
  if (ownerId) list.add(channels.user(tenantId, applicationId, ownerId));
  for (const entry of acl)
    list.add(aclChannel(tenantId, applicationId, entry.principalType, entry.principalId));
  return [...list];
}

/**
 * Whether a fact only moved progress: a progress report with no notice that left the task's status and
 * health as they were. Its messages carry `coalesceKey` (the task id), so the gateway may replace them,
 * for a client that reads too slowly, by a newer one of the same task (docs/realtime.md); every other
 * message (creation, a new attempt, a failure, a terminal state, an action required, a revoke) has none
 * and always goes.
 */
export function progressOnly(
  before: TaskState | null,
  after: TaskState,
  event: TaskEventRecord,
  notice: Notice | null,
): boolean {
  return (
    event.type === 'STEP_PROGRESS' &&
    notice === null &&
    before !== null &&
    before.task.lifecycleStatus === after.task.lifecycleStatus &&
    before.task.businessStatus === after.task.businessStatus &&
    before.task.health === after.task.health
  );
}

export function taskProjections(
  state: TaskState,
  event: TaskEventRecord,
  acl: AclEntry[],
  notice: Notice | null,
  newId: () => string,
  at: Date,
  channelNotice: ChannelNotice | null = null,
  coalescable = false,
): RealtimeRecord[] {
  const base = {
    tenantId: state.task.tenantId,
    aggregateType: 'TASK' as const,
    aggregateId: state.task.id,
    aggregateVersion: state.task.version,
    createdAt: at,
  };
  const marker = coalescable && !channelNotice ? { coalesceKey: state.task.id } : {};
  const summary = { ...summaryPayload(state, notice), ...marker };
  const targeted = channelNotice ? summaryPayload(state, channelNotice.notice) : summary;
  const told = new Set(channelNotice?.channels ?? []);
  const operatorSummary = {
    ...targeted,
    tenantId: state.task.tenantId,
    applicationId: state.task.applicationId,
    workflowName: state.task.workflowName,
    executionNumber: state.execution.number,
  };
  return [
    ...summaryChannels(state, acl).map((channel) => ({
      ...base,
      id: newId(),
      channel,
      projection: 'USER_SUMMARY' as const,
      payload: told.has(channel) ? targeted : summary,
    })),
    {
      ...base,
      id: newId(),
      channel: channels.detail(state.task.tenantId, state.task.id),
      projection: 'TASK_DETAIL',
      payload: { ...detailPayload(state, event, notice, at), ...marker },
    },
    ...[channels.operator, channels.operatorTenant(state.task.tenantId)].map((channel) => ({
      ...base,
      id: newId(),
      channel,
      projection: 'OPERATOR_SUMMARY' as const,
      payload: operatorSummary,
    })),
  ];
}

export function workflowProjection(workflow: WorkflowRecord, newId: () => string, at: Date): RealtimeRecord {
  return {
    id: newId(),
    tenantId: workflow.tenantId,
    aggregateType: 'WORKFLOW',
    aggregateId: workflow.id,
    aggregateVersion: workflow.version,
    channel: channels.workflow(workflow.tenantId, workflow.id),
    projection: 'WORKFLOW_SUMMARY',
    payload: workflowPayload(workflow),
    createdAt: at,
  };
}

const terminal: ReadonlySet<LifecycleStatus> = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT']);

/** A workflow's lifecycle from its tasks' counts: running while any runs, ended when all ended. */
export function workflowLifecycle(counts: Partial<Record<LifecycleStatus, number>>): LifecycleStatus {
  const total = Object.values(counts).reduce((a, b) => a + (b ?? 0), 0);
  if (total === 0) return 'PENDING';
  const count = (s: LifecycleStatus) => counts[s] ?? 0;
  const ended = [...terminal].reduce((sum, s) => sum + count(s), 0);
  if (ended < total) return count('RUNNING') > 0 || ended > 0 ? 'RUNNING' : 'PENDING';
  if (count('FAILED') > 0) return 'FAILED';
  if (count('TIMED_OUT') > 0) return 'TIMED_OUT';
  if (count('CANCELLED') === total) return 'CANCELLED';
  return 'SUCCEEDED';
}

/** The workflow after one of its tasks moved from `from` (null: newly added) to `to`. */
export function workflowAfterTaskChange(
  workflow: WorkflowRecord,
  from: LifecycleStatus | null,
  to: LifecycleStatus,
  at: Date,
): WorkflowRecord {
  const taskCounts = { ...workflow.taskCounts };
  if (from) taskCounts[from] = Math.max(0, (taskCounts[from] ?? 0) - 1);
  taskCounts[to] = (taskCounts[to] ?? 0) + 1;
  for (const key of Object.keys(taskCounts) as LifecycleStatus[])
    if (taskCounts[key] === 0) delete taskCounts[key];
  return {
    ...workflow,
    taskCounts,
    taskCount: workflow.taskCount + (from ? 0 : 1),
    lifecycleStatus: workflowLifecycle(taskCounts),
    version: workflow.version + 1n,
    updatedAt: at,
  };
}
