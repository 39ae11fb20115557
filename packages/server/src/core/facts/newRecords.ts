import type { DynamicRegistrationPolicy, FailurePolicy, StepDefinition } from '@tdp/protocol';
import type { IdGenerator } from '../shared/ports.ts';
import type {
  ExecutionSnapshot,
  SchedulingRequestRecord,
  StepRecord,
  TaskRecord,
  TaskState,
  WorkflowRecord,
} from './records.ts';

export interface NewStepSpec {
  key: string;
  operationCode: string;
  capability?: string;
  capabilityVersion?: string;
  expectedProducer: string | null;
  dependsOn: string[];
  failurePolicy: FailurePolicy;
  displayName?: string | null;
  heartbeatIntervalSeconds?: number | null;
  heartbeatTimeoutSeconds?: number | null;
}

export interface NewTaskSpec {
  tenantId: string;
  applicationId: string;
  workflowId: string;
  clientTaskKey: string;
  name: string;
  ownerId: string | null;
  taskType?: string | null;
  productId?: string | null;
  statusDefinitionVersion?: number | null;
  definition?: { id: string; name: string; version: string } | null;
  snapshot: ExecutionSnapshot;
  steps: NewStepSpec[];
  externalRef?: string | null;
  input?: unknown;
  callbackUrl?: string | null;
  priority?: number;
  dynamicPolicy?: DynamicRegistrationPolicy;
  /** A child task: the parent task and its step that starts it. */
  parent?: { taskId: string; stepId: string } | null;
}

/** The step rows of a frozen definition's steps, for a task the platform coordinates. */
export function stepSpecsOf(steps: StepDefinition[], expectedProducer: string): NewStepSpec[] {
  return steps.map((step) => ({
    key: step.key,
    operationCode: step.capability,
    capability: step.capability,
    capabilityVersion: step.capabilityVersion,
    expectedProducer,
    dependsOn: step.dependsOn,
    failurePolicy: step.failurePolicy,
    heartbeatTimeoutSeconds: step.timeouts.heartbeatMs ? Math.ceil(step.timeouts.heartbeatMs / 1000) : null,
  }));
}

/** A step row in its first state: attempt 1, waiting, version 1. */
export function newStepRecord(
  ids: IdGenerator,
  taskId: string,
  executionId: string,
  spec: NewStepSpec,
  at: Date,
): StepRecord {
  return {
    id: ids.newId(),
    taskId,
    executionId,
    key: spec.key,
    attempt: 1,
    clientStepKey: spec.key,
    capability: spec.capability ?? spec.operationCode,
    capabilityVersion: spec.capabilityVersion ?? '*',
    operationCode: spec.operationCode,
    operationDefinitionVersion: null,
    expectedProducer: spec.expectedProducer,
    failurePolicy: spec.failurePolicy,
    dependsOn: spec.dependsOn,
    dynamic: false,
    parentAttemptId: null,
    depth: 0,
    displayName: spec.displayName ?? null,
    attemptId: null,
    current: true,
    status: 'WAITING',
    businessStatus: null,
    phaseCode: null,
    phaseLabel: null,
    progress: null,
    health: 'HEALTHY',
    sourceSeqs: {},
    heartbeatIntervalSeconds: spec.heartbeatIntervalSeconds ?? null,
    heartbeatTimeoutSeconds: spec.heartbeatTimeoutSeconds ?? null,
    lastHeartbeatSeq: 0n,
    lastHeartbeatAt: null,
    staleSince: null,
    dataSchema: null,
    stateData: null,
    startedAt: null,
    finishedAt: null,
    durationMs: null,
    durationSource: null,
    error: null,
    reusedFromExecutionId: null,
    waitingFor: null,
    version: 1n,
    createdAt: at,
    updatedAt: at,
  };
}

/** A new task with execution #1 and its known steps: lifecycle PENDING, task version 1. */
export function newTaskState(ids: IdGenerator, spec: NewTaskSpec, at: Date): TaskState {
  const taskId = ids.newId();
  const executionId = ids.newId();
  const task: TaskRecord = {
    id: taskId,
    tenantId: spec.tenantId,
    applicationId: spec.applicationId,
    workflowId: spec.workflowId,
    clientTaskKey: spec.clientTaskKey,
    workflowDefinitionId: spec.definition?.id ?? null,
    workflowName: spec.definition?.name ?? null,
    workflowVersion: spec.definition?.version ?? null,
    name: spec.name,
    externalRef: spec.externalRef ?? null,
    input: spec.input ?? {},
    callbackUrl: spec.callbackUrl ?? null,
    priority: spec.priority ?? 50,
    ownerId: spec.ownerId,
    taskType: spec.taskType ?? null,
    productId: spec.productId ?? null,
    statusDefinitionVersion: spec.statusDefinitionVersion ?? null,
    lifecycleStatus: 'PENDING',
    businessStatus: 'PENDING',
    health: 'HEALTHY',
    failure: null,
    coordinatorSourceSeq: 0n,
    dynamicPolicy: spec.dynamicPolicy ?? {},
    dynamicStepCount: 0,
    version: 1n,
    currentExecutionId: executionId,
    createdAt: at,
    updatedAt: at,
    startedAt: null,
    finishedAt: null,
    durationMs: null,
    eventsPrunedBefore: 1n,
    parentTaskId: spec.parent?.taskId ?? null,
    parentStepId: spec.parent?.stepId ?? null,
  };
  return {
    task,
    execution: {
      id: executionId,
      taskId,
      number: 1,
      status: 'CREATED',
      progress: 0,
      snapshot: spec.snapshot,
      version: 1n,
      callbackSequence: 0,
      createdAt: at,
      startedAt: null,
      completedAt: null,
      updatedAt: at,
    },
    steps: spec.steps.map((step) => newStepRecord(ids, taskId, executionId, step, at)),
  };
}

/** A workflow created together with its first tasks (counted in, version 1). */
export function newWorkflowRecord(
  ids: IdGenerator,
  spec: {
    tenantId: string;
    applicationId: string;
    clientWorkflowKey: string;
    ownerId: string | null;
    title: string;
    workflowType: string | null;
    requestHash: string;
    taskCount: number;
  },
  at: Date,
): WorkflowRecord {
  return {
    id: ids.newId(),
    tenantId: spec.tenantId,
    applicationId: spec.applicationId,
    clientWorkflowKey: spec.clientWorkflowKey,
    ownerId: spec.ownerId,
    title: spec.title,
    workflowType: spec.workflowType,
    lifecycleStatus: 'PENDING',
    version: 1n,
    taskCount: spec.taskCount,
    taskCounts: spec.taskCount > 0 ? { PENDING: spec.taskCount } : {},
    requestHash: spec.requestHash,
    createdAt: at,
    updatedAt: at,
  };
}

/** A step's request for a worker, due `availableAt`: in line for its tenant, application and fairness key. */
export function newSchedulingRequest(
  ids: IdGenerator,
  state: TaskState,
  stepId: string,
  availableAt: Date,
  at: Date,
): SchedulingRequestRecord {
  const fairness = state.execution.snapshot.fairness;
  return {
    id: ids.newId(),
    taskId: state.task.id,
    stepId,
    tenantId: state.task.tenantId,
    applicationId: state.task.applicationId,
    fairnessKey: fairness?.key ?? '',
    fairnessWeight: fairness?.weight ?? 1,
    priority: state.task.priority,
    availableAt,
    createdAt: at,
  };
}
