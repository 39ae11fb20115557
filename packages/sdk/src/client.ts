/**
 * The typed client of TDP's public API for an application's backend (its API key): workflow
 * definitions, tasks, their events and timeline, status workflows and who may see a task, and the
 * tokens a browser needs. Requests and replies are the protocol's types; failures are `TdpApiError`
 * (an answer) or `TdpNetworkError` (none). Creating a task always carries an Idempotency-Key, so it is
 * retried safely; see transport.ts for what else is retried.
 */
import { randomUUID } from 'node:crypto';
import type {
  BatchGetRequest,
  BatchGetResult,
  ClassificationRequest,
  CreateTaskRequest,
  CreateWorkflowRequest,
  LifecycleStatus,
  NewStatusTask,
  PublishWarning,
  PublishWorkflowDefinitionRequest,
  SignalSent,
  TaskCreated,
  TaskEventPage,
  TaskPage,
  TaskSummary,
  TaskWithExecution,
  WorkflowCreated,
  WorkflowDefinition,
} from '@tdp/protocol';
import { TdpAccessCalls } from './accessCalls.ts';
import { TdpConcurrencyKeys } from './concurrencyKeys.ts';
import { TdpCoordinator } from './coordinator.ts';
import { decideStep, type StepDecision, type StepDecisionOptions } from './decisions.ts';
import { outputsOf, type TaskResult } from './results.ts';
import { TdpSchedules } from './schedules.ts';
import type { CallOptions, TdpClientOptions } from './transport.ts';
import type { CallbackDelivery, Page, TimelineEntry, WorkerSummary, WorkflowTaskAdded } from './views.ts';
import { type WaitForTaskOptions, waitForTerminal } from './waiting.ts';
import { type DefinedWorkflow, definitionOf, type WorkflowInput } from './workflow.ts';

export interface CreatedTask extends TaskCreated {
  /**
   * True when the key had been used already: `task` and `execution` are the original answer again, and
   * `current` is the task as it stands now (null once archived).
   */
  replayed: boolean;
  /** The Idempotency-Key sent (yours, or the one generated); reuse it to repeat the request. */
  idempotencyKey: string;
}

/**
 * A task of a workflow value: the request without the workflow's name and version, its `input` of the
 * workflow's input type (required when that type has required fields, free when it is `unknown`).
 */
export type TaskRequestOf<W extends DefinedWorkflow> = Omit<
  CreateTaskRequest,
  'workflowName' | 'workflowVersion' | 'input'
> &
  (unknown extends WorkflowInput<W>
    ? { input?: unknown }
    : undefined extends WorkflowInput<W>
      ? { input?: WorkflowInput<W> }
      : { input: WorkflowInput<W> });

/** A task: its id, or what `createTask` answered. */
export type TaskRef = string | { task: { id: string } };

const taskIdOf = (task: TaskRef): string => (typeof task === 'string' ? task : task.task.id);

const segment = encodeURIComponent;

export class TdpClient extends TdpAccessCalls {
  /** The status API for steps your application runs and reports itself. */
  readonly coordinator: TdpCoordinator;
  /** Cron schedules that start tasks. */
  readonly schedules: TdpSchedules;
  /** The tenant's concurrency keys and rate limits, and their limits at run time. */
  readonly concurrencyKeys: TdpConcurrencyKeys;

  constructor(options: TdpClientOptions) {
    super(options);
    this.coordinator = new TdpCoordinator(this.transport);
    this.schedules = new TdpSchedules(this.transport);
    this.concurrencyKeys = new TdpConcurrencyKeys(this.transport);
  }

  // Workflow definitions

  /**
   * Publishes a definition (a `defineWorkflow()` result or the plain request). Publishing the same
   * name, version and content again is safe (`created: false`); other content is WORKFLOW_VERSION_EXISTS.
   * `warnings` names each step no registered worker offers now, with the nearest offered names (a likely
   * typo; such a step waits for a worker).
   */
  async publishWorkflowDefinition(
    definition: PublishWorkflowDefinitionRequest | DefinedWorkflow,
    options: CallOptions = {},
  ): Promise<{ definition: WorkflowDefinition; created: boolean; warnings: PublishWarning[] }> {
    const answer = await this.transport.send({
      ...options,
      method: 'POST',
      path: '/v1/workflow-definitions',
      body: definitionOf(definition),
      retry: 'idempotent',
    });
    const { warnings = [], ...stored } = answer.body as WorkflowDefinition & { warnings?: PublishWarning[] };
    return { definition: stored, created: answer.status === 201, warnings };
  }

  listWorkflowDefinitions(
    query: { name?: string; limit?: number; cursor?: string } = {},
    options: CallOptions = {},
  ): Promise<Page<WorkflowDefinition>> {
    return this.call({ ...options, method: 'GET', path: '/v1/workflow-definitions', query, retry: 'read' });
  }

  getWorkflowDefinition(
    name: string,
    version: string,
    options: CallOptions = {},
  ): Promise<WorkflowDefinition> {
    return this.call({
      ...options,
      method: 'GET',
      path: `/v1/workflow-definitions/${segment(name)}/versions/${segment(version)}`,
      retry: 'read',
    });
  }

  // Tasks

  /**
   * Submits a task. Without `idempotencyKey` one is generated; every retry of this call sends the same
   * one, so a lost answer never makes a second task. Keep the key (e.g. your order id) to be safe across
   * restarts of your own process.
   */
  createTask(
    request: CreateTaskRequest,
    options?: CallOptions & { idempotencyKey?: string },
  ): Promise<CreatedTask>;
  /**
   * Submits a task of a `defineWorkflow()` value (published under its name and version): `input` is
   * checked against the workflow's input type.
   */
  createTask<W extends DefinedWorkflow>(
    workflow: W,
    request: TaskRequestOf<W>,
    options?: CallOptions & { idempotencyKey?: string },
  ): Promise<CreatedTask>;
  async createTask(
    first: CreateTaskRequest | DefinedWorkflow,
    second?:
      | (CallOptions & { idempotencyKey?: string })
      | Omit<CreateTaskRequest, 'workflowName' | 'workflowVersion'>,
    third?: CallOptions & { idempotencyKey?: string },
  ): Promise<CreatedTask> {
    const [request, options = {}] =
      'definition' in first
        ? [
            {
              ...(second as Omit<CreateTaskRequest, 'workflowName' | 'workflowVersion'>),
              workflowName: first.definition.name,
              workflowVersion: first.definition.version,
            },
            third,
          ]
        : [first, second as (CallOptions & { idempotencyKey?: string }) | undefined];
    const idempotencyKey = options.idempotencyKey ?? randomUUID();
    const answer = await this.transport.send({
      ...options,
      method: 'POST',
      path: '/v1/tasks',
      body: request,
      headers: { 'idempotency-key': idempotencyKey },
      retry: 'idempotent',
    });
    return { ...(answer.body as TaskCreated), replayed: answer.status === 200, idempotencyKey };
  }

  getTask(taskId: string, options: CallOptions = {}): Promise<TaskWithExecution> {
    return this.call({ ...options, method: 'GET', path: `/v1/tasks/${segment(taskId)}`, retry: 'read' });
  }

  /** Tasks newest first; `externalRef` finds yours by your reference. */
  listTasks(
    query: {
      limit?: number;
      cursor?: string;
      externalRef?: string;
      status?: LifecycleStatus;
      /** The child tasks this task started. */
      parentTaskId?: string;
    } = {},
    options: CallOptions = {},
  ): Promise<TaskPage> {
    return this.call({ ...options, method: 'GET', path: '/v1/tasks', query, retry: 'read' });
  }

  /** Cancels a task (idempotent); a finished one is INVALID_TRANSITION. */
  cancelTask(
    taskId: string,
    body: { reason?: string } = {},
    options: CallOptions = {},
  ): Promise<TaskWithExecution> {
    return this.call({
      ...options,
      method: 'POST',
      path: `/v1/tasks/${segment(taskId)}:cancel`,
      body,
      retry: 'idempotent',
    });
  }

  /**
   * Runs a finished task again (its next execution); with `fromStep`, only that step and the steps after
   * it run, the others keep their outputs. Sent once: a repeat would run it once more.
   */
  retryTask(taskId: string, options: CallOptions & { fromStep?: string } = {}): Promise<TaskWithExecution> {
    const { fromStep, ...call } = options;
    return this.call({
      ...call,
      method: 'POST',
      path: `/v1/tasks/${segment(taskId)}:retry`,
      ...(fromStep ? { body: { fromStep } } : {}),
      retry: 'never',
    });
  }

  /**
   * Sends a signal to a task: its waiting signal step of this name ends with `payload` as its output, or
   * the signal is kept for the step. Without `idempotencyKey` one is generated and reused by retries.
   */
  async sendSignal(
    taskId: string,
    name: string,
    payload: unknown,
    options: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<SignalSent> {
    const { idempotencyKey = randomUUID(), ...call } = options;
    const answer = await this.transport.send({
      ...call,
      method: 'POST',
      path: `/v1/tasks/${segment(taskId)}/signals/${segment(name)}`,
      body: { payload },
      headers: { 'idempotency-key': idempotencyKey },
      retry: 'idempotent',
    });
    return answer.body as SignalSent;
  }

  /**
   * Resolves with the task once its lifecycle status is terminal (SUCCEEDED, FAILED, CANCELLED,
   * TIMED_OUT); rejects with `TdpWaitTimeoutError` after `timeoutMs` (the task goes on). The SDK reads
   * the task with a growing pause (waiting.ts says why not the stream).
   */
  waitForTask(task: TaskRef, options: WaitForTaskOptions): Promise<TaskWithExecution> {
    const taskId = taskIdOf(task);
    return waitForTerminal((signal) => this.getTask(taskId, { signal }), taskId, options);
  }

  /**
   * `waitForTask`, then the outputs of the task's succeeded steps typed by its `defineWorkflow()` value
   * (results.ts): a step that failed, was skipped or never ran has none.
   */
  async waitForResult<W extends DefinedWorkflow>(
    workflow: W,
    task: TaskRef,
    options: WaitForTaskOptions,
  ): Promise<TaskResult<W>> {
    const view = await this.waitForTask(task, options);
    return { ...view, outputs: outputsOf(workflow, view) };
  }

  /**
   * Approves a waiting approval step as one of your users (`asUser`). The answer's `outcome` is what
   * the step became: APPROVED once enough approvals are in, else still PENDING.
   */
  approveStep(taskId: string, stepKey: string, options: StepDecisionOptions): Promise<StepDecision> {
    return decideStep(
      this.transport,
      (request, call) => this.createUserToken(request, call),
      'approve',
      taskId,
      stepKey,
      options,
    );
  }

  /** Rejects a waiting approval step as one of your users: the step fails APPROVAL_REJECTED. */
  rejectStep(taskId: string, stepKey: string, options: StepDecisionOptions): Promise<StepDecision> {
    return decideStep(
      this.transport,
      (request, call) => this.createUserToken(request, call),
      'reject',
      taskId,
      stepKey,
      options,
    );
  }

  /** The task's status events after `afterTaskVersion` (410 EVENTS_PRUNED when that part is gone). */
  listTaskEvents(
    taskId: string,
    query: { afterTaskVersion?: string; limit?: number } = {},
    options: CallOptions = {},
  ): Promise<TaskEventPage> {
    return this.call({
      ...options,
      method: 'GET',
      path: `/v1/tasks/${segment(taskId)}/events`,
      query,
      retry: 'read',
    });
  }

  async getTaskTimeline(taskId: string, options: CallOptions = {}): Promise<TimelineEntry[]> {
    const page = await this.call<{ items: TimelineEntry[] }>({
      ...options,
      method: 'GET',
      path: `/v1/tasks/${segment(taskId)}/timeline`,
      retry: 'read',
    });
    return page.items;
  }

  /** Status of many tasks at once; those still at the `knownVersion` you give come back without a body. */
  batchGetTaskStatus(tasks: BatchGetRequest['tasks'], options: CallOptions = {}): Promise<BatchGetResult> {
    return this.call({
      ...options,
      method: 'POST',
      path: '/v1/tasks/status:batchGet',
      body: { tasks },
      retry: 'read',
    });
  }

  /** Binds the task type / status definition (once) or changes productId, at the task version you read. */
  classifyTask(
    taskId: string,
    taskVersion: string,
    request: ClassificationRequest,
    options: CallOptions = {},
  ): Promise<TaskWithExecution> {
    return this.call({
      ...options,
      method: 'PATCH',
      path: `/v1/tasks/${segment(taskId)}/classification`,
      body: request,
      headers: { 'if-match': `"${taskVersion}"` },
      retry: 'never',
    });
  }

  // Callbacks

  async listCallbackDeliveries(taskId: string, options: CallOptions = {}): Promise<CallbackDelivery[]> {
    const page = await this.call<{ items: CallbackDelivery[] }>({
      ...options,
      method: 'GET',
      path: `/v1/tasks/${segment(taskId)}/callbacks`,
      retry: 'read',
    });
    return page.items;
  }

  /** Sends a callback again (e.g. one that went DEAD). Sent once. */
  async redeliverCallback(callbackId: string, options: CallOptions = {}): Promise<void> {
    await this.call({
      ...options,
      method: 'POST',
      path: `/v1/callbacks/${segment(callbackId)}:redeliver`,
      retry: 'never',
    });
  }

  // External references

  /** Maps your reference (unique per application) to the task. */
  async setExternalRef(
    taskId: string,
    refType: string,
    refValue: string,
    options: CallOptions = {},
  ): Promise<void> {
    await this.call({
      ...options,
      method: 'PUT',
      path: `/v1/tasks/${segment(taskId)}/external-refs/${segment(refType)}/${segment(refValue)}`,
      retry: 'idempotent',
    });
  }

  /** The id of the task your reference maps to (TASK_NOT_FOUND when none). */
  async findTaskByExternalRef(refType: string, refValue: string, options: CallOptions = {}): Promise<string> {
    const found = await this.call<{ taskId: string }>({
      ...options,
      method: 'GET',
      path: `/v1/external-refs/${segment(refType)}/${segment(refValue)}`,
      retry: 'read',
    });
    return found.taskId;
  }

  // Status workflows and who may see a task

  /** Creates a workflow with its first tasks (idempotent by `clientWorkflowKey`). */
  createWorkflow(request: CreateWorkflowRequest, options: CallOptions = {}): Promise<WorkflowCreated> {
    return this.call({
      ...options,
      method: 'POST',
      path: '/v1/workflows',
      body: request,
      retry: 'idempotent',
    });
  }

  getWorkflow(
    workflowId: string,
    options: CallOptions = {},
  ): Promise<{ workflow: Record<string, unknown>; tasks: TaskSummary[] }> {
    return this.call({
      ...options,
      method: 'GET',
      path: `/v1/workflows/${segment(workflowId)}`,
      retry: 'read',
    });
  }

  /** Adds a task to a workflow (idempotent by `clientTaskKey`). */
  addWorkflowTask(
    workflowId: string,
    task: NewStatusTask,
    options: CallOptions = {},
  ): Promise<WorkflowTaskAdded> {
    return this.call({
      ...options,
      method: 'POST',
      path: `/v1/workflows/${segment(workflowId)}/tasks`,
      body: task,
      retry: 'idempotent',
    });
  }

  /** The worker sessions that serve your tenant (a capability its workflows run), with their state. */
  listWorkers(options: CallOptions = {}): Promise<WorkerSummary[]> {
    return this.call({ ...options, method: 'GET', path: '/v1/workers', retry: 'read' });
  }
}

/** A client of TDP's public API for an application's backend. */
export function createTdpClient(options: TdpClientOptions): TdpClient {
  return new TdpClient(options);
}
