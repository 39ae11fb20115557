/** Typed rows (snake_case) of the task tables and their mapping to the core records (camelCase). */
import type {
  DynamicRegistrationPolicy,
  ExecutionStatus,
  FailurePolicy,
  Health,
  LifecycleStatus,
  Progress,
  StepStatus,
  StructuredError,
  WaitingFor,
} from '@tdp/protocol';
import type {
  ExecutionRecord,
  ExecutionSnapshot,
  StepRecord,
  TaskFailure,
  TaskRecord,
  WorkflowRecord,
} from '../../../core/facts/records.ts';

export interface TaskRow {
  id: string;
  tenant_id: string;
  application_id: string;
  workflow_id: string;
  client_task_key: string;
  workflow_definition_id: string | null;
  workflow_name: string | null;
  workflow_version: string | null;
  name: string;
  external_ref: string | null;
  input: unknown;
  callback_url: string | null;
  priority: number;
  owner_id: string | null;
  task_type: string | null;
  product_id: string | null;
  status_definition_version: number | null;
  lifecycle_status: LifecycleStatus;
  business_status: string;
  health: Health;
  failure: TaskFailure | null;
  coordinator_source_seq: bigint;
  dynamic_policy: DynamicRegistrationPolicy;
  dynamic_step_count: number;
  version: bigint;
  current_execution_id: string;
  created_at: Date;
  updated_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  duration_ms: bigint | null;
  events_pruned_before: bigint;
  parent_task_id: string | null;
  parent_step_id: string | null;
}

export interface ExecutionRow {
  id: string;
  task_id: string;
  number: number;
  status: ExecutionStatus;
  progress: number;
  snapshot: ExecutionSnapshot;
  version: bigint;
  callback_sequence: number;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  updated_at: Date;
}

export interface StepRow {
  id: string;
  task_id: string;
  execution_id: string;
  step_key: string;
  attempt: number;
  client_step_key: string;
  capability: string;
  capability_version: string;
  operation_code: string;
  operation_definition_version: number | null;
  expected_producer: string | null;
  failure_policy: FailurePolicy;
  depends_on: string[];
  dynamic: boolean;
  parent_attempt_id: string | null;
  depth: number;
  display_name: string | null;
  attempt_id: string | null;
  current: boolean;
  status: StepStatus;
  business_status: string | null;
  phase_code: string | null;
  phase_label: string | null;
  progress: Progress | null;
  health: Health;
  source_seqs: Record<string, number>;
  heartbeat_interval_seconds: number | null;
  heartbeat_timeout_seconds: number | null;
  last_heartbeat_seq: bigint;
  last_heartbeat_at: Date | null;
  stale_since: Date | null;
  /** The step's lease's heartbeat, when the read joined it (`leasedStepColumns`). */
  lease_heartbeat_seq?: bigint | null;
  lease_heartbeat_at?: Date | null;
  data_schema: string | null;
  state_data: unknown;
  started_at: Date | null;
  finished_at: Date | null;
  duration_ms: bigint | null;
  duration_source: string | null;
  error: StructuredError | null;
  reused_from_execution_id: string | null;
  waiting_for: WaitingFor | null;
  version: bigint;
  created_at: Date;
  updated_at: Date;
}

export interface WorkflowRow {
  id: string;
  tenant_id: string;
  application_id: string;
  client_workflow_key: string;
  owner_id: string | null;
  title: string;
  workflow_type: string | null;
  lifecycle_status: LifecycleStatus;
  version: bigint;
  task_count: number;
  task_counts: WorkflowRecord['taskCounts'];
  request_hash: string;
  created_at: Date;
  updated_at: Date;
}

const num = (value: bigint | null) => (value === null ? null : Number(value));

export const toTask = (r: TaskRow): TaskRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  applicationId: r.application_id,
  workflowId: r.workflow_id,
  clientTaskKey: r.client_task_key,
  workflowDefinitionId: r.workflow_definition_id,
  workflowName: r.workflow_name,
  workflowVersion: r.workflow_version,
  name: r.name,
  externalRef: r.external_ref,
  input: r.input,
  callbackUrl: r.callback_url,
  priority: r.priority,
  ownerId: r.owner_id,
  taskType: r.task_type,
  productId: r.product_id,
  statusDefinitionVersion: r.status_definition_version,
  lifecycleStatus: r.lifecycle_status,
  businessStatus: r.business_status,
  health: r.health,
  failure: r.failure,
  coordinatorSourceSeq: r.coordinator_source_seq,
  dynamicPolicy: r.dynamic_policy,
  dynamicStepCount: r.dynamic_step_count,
  version: r.version,
  currentExecutionId: r.current_execution_id,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  durationMs: num(r.duration_ms),
  eventsPrunedBefore: r.events_pruned_before,
  parentTaskId: r.parent_task_id,
  parentStepId: r.parent_step_id,
});

export const toExecution = (r: ExecutionRow): ExecutionRecord => ({
  id: r.id,
  taskId: r.task_id,
  number: r.number,
  status: r.status,
  progress: r.progress,
  snapshot: r.snapshot,
  version: r.version,
  callbackSequence: r.callback_sequence,
  createdAt: r.created_at,
  startedAt: r.started_at,
  completedAt: r.completed_at,
  updatedAt: r.updated_at,
});

/** The later of a step's own heartbeat value and its lease's (heartbeats renew only the lease). */
function later<T extends bigint | Date | null>(own: T, lease: T | null | undefined): T {
  if (lease === null || lease === undefined) return own;
  return own === null || lease > own ? lease : own;
}

export const toStep = (r: StepRow): StepRecord => ({
  id: r.id,
  taskId: r.task_id,
  executionId: r.execution_id,
  key: r.step_key,
  attempt: r.attempt,
  clientStepKey: r.client_step_key,
  capability: r.capability,
  capabilityVersion: r.capability_version,
  operationCode: r.operation_code,
  operationDefinitionVersion: r.operation_definition_version,
  expectedProducer: r.expected_producer,
  failurePolicy: r.failure_policy,
  dependsOn: r.depends_on,
  dynamic: r.dynamic,
  parentAttemptId: r.parent_attempt_id,
  depth: r.depth,
  displayName: r.display_name,
  attemptId: r.attempt_id,
  current: r.current,
  status: r.status,
  businessStatus: r.business_status,
  phaseCode: r.phase_code,
  phaseLabel: r.phase_label,
  progress: r.progress,
  health: r.health,
  sourceSeqs: r.source_seqs,
  heartbeatIntervalSeconds: r.heartbeat_interval_seconds,
  heartbeatTimeoutSeconds: r.heartbeat_timeout_seconds,
  lastHeartbeatSeq: later(r.last_heartbeat_seq, r.lease_heartbeat_seq),
  lastHeartbeatAt: later(r.last_heartbeat_at, r.lease_heartbeat_at),
  staleSince: r.stale_since,
  dataSchema: r.data_schema,
  stateData: r.state_data,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  durationMs: num(r.duration_ms),
  durationSource: r.duration_source,
  error: r.error,
  reusedFromExecutionId: r.reused_from_execution_id,
  waitingFor: r.waiting_for,
  version: r.version,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export const toWorkflow = (r: WorkflowRow): WorkflowRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  applicationId: r.application_id,
  clientWorkflowKey: r.client_workflow_key,
  ownerId: r.owner_id,
  title: r.title,
  workflowType: r.workflow_type,
  lifecycleStatus: r.lifecycle_status,
  version: r.version,
  taskCount: r.task_count,
  taskCounts: r.task_counts,
  requestHash: r.request_hash,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/** Heartbeat deadline of a running step: last sign of life + its timeout (null: not watched). */
export function heartbeatDeadline(step: StepRecord): Date | null {
  if (step.status !== 'RUNNING' || step.heartbeatTimeoutSeconds === null) return null;
  const from = step.lastHeartbeatAt ?? step.startedAt;
  return from ? new Date(from.getTime() + step.heartbeatTimeoutSeconds * 1000) : null;
}
