/**
 * Tasks glossary
 * - task: the durable request "run workflow W on input I for application A"; it outlives its runs.
 * - execution: one run of a task with a frozen snapshot of the definition; a retry creates execution #2.
 * - step: one DAG node inside an execution; its state machine lives in the orchestration context.
 * - task version: rises by one with every recorded fact about the task (the event log's order).
 * - outbox event: a committed fact waiting to be published to the event bus.
 */
import type { ExecutionStatus, LifecycleStatus, StepDefinition, StepStatus } from '@tdp/protocol';

export interface ExecutionSnapshot {
  definitionId: string;
  name: string;
  version: string;
  steps: StepDefinition[];
}

export interface TaskRecord {
  id: string;
  tenantId: string;
  applicationId: string;
  workflowDefinitionId: string;
  workflowName: string;
  workflowVersion: string;
  name: string;
  externalRef: string | null;
  input: unknown;
  callbackUrl: string | null;
  priority: number;
  ownerId: string | null;
  lifecycleStatus: LifecycleStatus;
  version: bigint;
  currentExecutionId: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface ExecutionRecord {
  id: string;
  taskId: string;
  number: number;
  status: ExecutionStatus;
  progress: number;
  snapshot: ExecutionSnapshot;
  version: bigint;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
  updatedAt: Date;
}

export interface StepRecord {
  id: string;
  executionId: string;
  key: string;
  capability: string;
  capabilityVersion: string;
  dependsOn: string[];
  status: StepStatus;
  version: bigint;
  createdAt: Date;
  updatedAt: Date;
}

export interface TaskEventRecord {
  id: string;
  taskId: string;
  executionId: string;
  taskVersion: bigint;
  type: string;
  producer: string;
  payload: Record<string, unknown>;
  occurredAt: Date;
}

export interface OutboxRecord {
  id: string;
  tenantId: string;
  applicationId: string;
  aggregateId: string;
  eventType: string;
  payload: Record<string, unknown>;
  createdAt: Date;
}

/** A task as read back: the task, its current execution and that execution's steps. */
export interface TaskState {
  task: TaskRecord;
  execution: ExecutionRecord;
  steps: StepRecord[];
}
