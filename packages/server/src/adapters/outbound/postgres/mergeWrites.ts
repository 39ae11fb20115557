import type {
  AttemptRecord,
  MapItemRecord,
  RealtimeRecord,
  SchedulingRequestRecord,
  StepRecord,
  TaskEventRecord,
  TaskState,
  WorkflowRecord,
} from '../../../core/facts/records.ts';
import type { FactWriteSet } from '../../../core/facts/writeSet.ts';

/**
 * Several facts of one transaction as one set of rows per table, applied in their order: a row written
 * by two facts is sent once in its last state (an inserted row that a later fact changed is inserted
 * as changed), lists are concatenated.
 */
export function mergeWrites(writes: FactWriteSet[]) {
  const newWorkflows = new Map<string, WorkflowRecord>();
  const workflows = new Map<string, WorkflowRecord>();
  const newTasks = new Map<string, { task: TaskState['task']; execution: TaskState['execution'] }>();
  const newExecutions = new Map<string, TaskState['execution']>();
  const tasks = new Map<string, TaskState['task']>();
  const executions = new Map<string, TaskState['execution']>();
  const newSteps = new Map<string, StepRecord>();
  const steps = new Map<string, StepRecord>();
  const attempts = new Map<string, AttemptRecord>();
  const revoked = new Set<string>();
  const closed = new Map<'DISPATCHED' | 'CANCELLED', string[]>();
  const commandAcks = new Map<string, { id: string; worker_id: string; acked_at: Date }>();
  const mapItems = new Map<string, MapItemRecord>();
  const closedMaps = new Map<string, { stepId: string; at: Date }>();
  /** A map's request made due again; a later close of the same step wins over it (and vice versa). */
  const reopened = new Map<string, SchedulingRequestRecord>();
  const merged = {
    /** One per transaction: a group commit (groupCommit.ts) merges several. */
    idempotency: [] as NonNullable<FactWriteSet['idempotency']>[],
    events: [] as TaskEventRecord[],
    dedup: [] as NonNullable<FactWriteSet['dedup']>,
    outbox: [] as FactWriteSet['outbox'],
    realtime: [] as RealtimeRecord[],
    schedulingRequests: [] as NonNullable<FactWriteSet['schedulingRequests']>,
    workerCommands: [] as NonNullable<FactWriteSet['workerCommands']>,
    timers: [] as NonNullable<FactWriteSet['timers']>,
    callbacks: [] as NonNullable<FactWriteSet['callbacks']>,
    timeline: [] as NonNullable<FactWriteSet['timeline']>,
    newMapItems: [] as NonNullable<FactWriteSet['newMapItems']>,
    stepDecisions: [] as NonNullable<FactWriteSet['stepDecisions']>,
    operatorAudit: [] as NonNullable<FactWriteSet['operatorAudit']>,
    notifications: [] as NonNullable<FactWriteSet['notifications']>,
    newAcl: [] as NonNullable<FactWriteSet['newAcl']>[],
    aclGrants: [] as NonNullable<FactWriteSet['aclGrants']>[],
  };
  for (const w of writes) {
    if (w.idempotency) merged.idempotency.push(w.idempotency);
    if (w.newWorkflow) newWorkflows.set(w.newWorkflow.id, w.newWorkflow);
    if (w.workflow) {
      if (newWorkflows.has(w.workflow.id)) newWorkflows.set(w.workflow.id, w.workflow);
      else workflows.set(w.workflow.id, w.workflow);
    }
    if (w.newTask) newTasks.set(w.newTask.task.id, { ...w.newTask });
    if (w.newExecution) newExecutions.set(w.newExecution.id, w.newExecution);
    if (w.task) {
      const created = newTasks.get(w.task.id);
      if (created) created.task = w.task;
      else tasks.set(w.task.id, w.task);
    }
    if (w.execution) {
      const created = newTasks.get(w.execution.taskId);
      if (created?.execution.id === w.execution.id) created.execution = w.execution;
      else if (newExecutions.has(w.execution.id)) newExecutions.set(w.execution.id, w.execution);
      else executions.set(w.execution.id, w.execution);
    }
    for (const step of w.newSteps ?? []) newSteps.set(step.id, step);
    for (const step of w.steps ?? []) {
      if (newSteps.has(step.id)) newSteps.set(step.id, step);
      else steps.set(step.id, step);
    }
    for (const attempt of w.attempts ?? []) attempts.set(attempt.id, attempt);
    for (const id of w.revokeAttemptIds ?? []) revoked.add(id);
    if (w.commandAcks) {
      const { workerId, commandIds, at } = w.commandAcks;
      for (const id of commandIds)
        if (!commandAcks.has(id)) commandAcks.set(id, { id, worker_id: workerId, acked_at: at });
    }
    if (w.closeSchedulingRequests && w.closeSchedulingRequests.stepIds.length > 0) {
      const list = closed.get(w.closeSchedulingRequests.status) ?? [];
      list.push(...w.closeSchedulingRequests.stepIds);
      closed.set(w.closeSchedulingRequests.status, list);
      for (const stepId of w.closeSchedulingRequests.stepIds) reopened.delete(stepId);
    }
    for (const request of w.reopenSchedulingRequests ?? []) {
      for (const [status, stepIds] of closed)
        closed.set(
          status,
          stepIds.filter((id) => id !== request.stepId),
        );
      reopened.set(request.stepId, request);
    }
    for (const item of w.mapItems ?? []) mapItems.set(`${item.stepId}:${item.index}`, item);
    for (const stepId of w.closeMapItems?.stepIds ?? [])
      if (!closedMaps.has(stepId)) closedMaps.set(stepId, { stepId, at: w.closeMapItems!.at });
    merged.newMapItems.push(...(w.newMapItems ?? []));
    merged.events.push(...w.events);
    merged.dedup.push(...(w.dedup ?? []));
    merged.outbox.push(...w.outbox);
    merged.realtime.push(...w.realtime);
    merged.schedulingRequests.push(...(w.schedulingRequests ?? []));
    merged.workerCommands.push(...(w.workerCommands ?? []));
    merged.timers.push(...(w.timers ?? []));
    merged.stepDecisions.push(...(w.stepDecisions ?? []));
    merged.operatorAudit.push(...(w.operatorAudit ?? []));
    merged.notifications.push(...(w.notifications ?? []));
    merged.callbacks.push(...(w.callbacks ?? []));
    merged.timeline.push(...(w.timeline ?? []));
    if (w.newAcl && w.newAcl.entries.length > 0) merged.newAcl.push(w.newAcl);
    if (w.aclGrants && w.aclGrants.entries.length > 0) merged.aclGrants.push(w.aclGrants);
  }
  return {
    ...merged,
    newWorkflows: [...newWorkflows.values()],
    workflows: [...workflows.values()],
    newTasks: [...newTasks.values()],
    newExecutions: [...newExecutions.values()],
    tasks: [...tasks.values()],
    executions: [...executions.values()],
    newSteps: [...newSteps.values()],
    steps: [...steps.values()],
    attempts: [...attempts.values()],
    revokeAttemptIds: [...revoked],
    closeSchedulingRequests: [...closed],
    reopenSchedulingRequests: [...reopened.values()],
    commandAcks,
    mapItems: [...mapItems.values()],
    closeMapItems: [...closedMaps.values()],
  };
}

/** One transaction's writes, merged: what each table file turns into its statements. */
export type MergedWrites = ReturnType<typeof mergeWrites>;
