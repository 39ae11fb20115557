/**
 * Workflows for outside coordinators (docs/status.md): a workflow is created once per
 * clientWorkflowKey, each task once per workflow + clientTaskKey; the first tasks and their known steps
 * commit with the workflow, each task with its TASK_CREATED fact at task version 1.
 */
import type { CreateWorkflowRequest, NewStatusTask, WorkflowCreated } from '@tdp/protocol';
import { findCycle } from '../definitions/dag.ts';
import { newTaskState, newWorkflowRecord } from '../facts/newRecords.ts';
import { KeyTakenError } from '../facts/ports.ts';
import { workflowProjection } from '../facts/projections.ts';
import type { TaskState, WorkflowRecord } from '../facts/records.ts';
import { type FactSession, inFactTransaction } from '../facts/session.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { fingerprint } from '../shared/canonicalJson.ts';
import { AppError } from '../shared/errors.ts';
import type { StatusDeps } from './deps.ts';

function checkKnownSteps(task: NewStatusTask, index: number): void {
  const steps = task.knownSteps ?? [];
  const keys = new Set<string>();
  for (const [s, step] of steps.entries()) {
    if (keys.has(step.stepId)) {
      throw new AppError(
        'VALIDATION_FAILED',
        `task ${task.clientTaskKey}: step ${step.stepId} appears twice`,
        [{ path: `/initialTasks/${index}/knownSteps/${s}/stepId`, message: 'duplicate stepId' }],
      );
    }
    keys.add(step.stepId);
  }
  for (const [s, step] of steps.entries()) {
    for (const dependency of step.dependsOn ?? []) {
      if (!keys.has(dependency)) {
        throw new AppError(
          'VALIDATION_FAILED',
          `task ${task.clientTaskKey}: step ${step.stepId} depends on unknown step ${dependency}`,
          [
            {
              path: `/initialTasks/${index}/knownSteps/${s}/dependsOn`,
              message: `unknown step ${dependency}`,
            },
          ],
        );
      }
    }
  }
  const cycle = findCycle(steps.map((s) => ({ key: s.stepId, dependsOn: s.dependsOn ?? [] })));
  if (cycle)
    throw new AppError(
      'VALIDATION_FAILED',
      `task ${task.clientTaskKey}: dependency cycle ${cycle.join(' -> ')}`,
    );
}

async function buildTask(
  deps: StatusDeps,
  principal: ApplicationPrincipal,
  workflow: WorkflowRecord,
  spec: NewStatusTask,
  ownerId: string | null,
  at: Date,
): Promise<TaskState> {
  if (spec.statusDefinitionVersion != null) {
    if (!spec.taskType)
      throw new AppError(
        'VALIDATION_FAILED',
        `task ${spec.clientTaskKey}: statusDefinitionVersion needs a taskType`,
      );
    const definition = await deps.registries.statusDefinition(
      principal.applicationId,
      spec.taskType,
      spec.statusDefinitionVersion,
    );
    if (!definition) {
      throw new AppError(
        'STATUS_DEFINITION_NOT_FOUND',
        `no status definition ${spec.taskType} v${spec.statusDefinitionVersion}`,
      );
    }
  }
  const state = newTaskState(
    deps.ids,
    {
      tenantId: principal.tenantId,
      applicationId: principal.applicationId,
      workflowId: workflow.id,
      clientTaskKey: spec.clientTaskKey,
      name: spec.title,
      ownerId: spec.ownerId ?? ownerId,
      taskType: spec.taskType ?? null,
      productId: spec.productId ?? null,
      statusDefinitionVersion: spec.statusDefinitionVersion ?? null,
      snapshot: { definitionId: '', name: workflow.title, version: '', steps: [] },
      steps: (spec.knownSteps ?? []).map((step) => ({
        key: step.stepId,
        operationCode: step.operationCode,
        expectedProducer: step.expectedProducer,
        dependsOn: step.dependsOn ?? [],
        failurePolicy: step.failurePolicy ?? 'FAIL_TASK',
        displayName: step.displayName ?? null,
        heartbeatIntervalSeconds: step.heartbeatIntervalSeconds ?? null,
        heartbeatTimeoutSeconds: step.heartbeatTimeoutSeconds ?? deps.defaultHeartbeatTimeoutSeconds,
      })),
      ...(spec.dynamicRegistrationPolicy ? { dynamicPolicy: spec.dynamicRegistrationPolicy } : {}),
    },
    at,
  );
  if (state.task.statusDefinitionVersion !== null) state.task.businessStatus = 'PENDING';
  return state;
}

async function commitNewTask(
  deps: StatusDeps,
  session: FactSession,
  principal: ApplicationPrincipal,
  state: TaskState,
  countInWorkflow: boolean,
) {
  await session.commit(
    null,
    state,
    {
      id: deps.ids.newId(),
      type: 'TASK_CREATED',
      producer: `application:${principal.applicationId}`,
      payload: { clientTaskKey: state.task.clientTaskKey, knownSteps: state.steps.map((s) => s.key) },
      occurredAt: session.now,
      receivedAt: session.now,
    },
    {
      write: { newTask: { task: state.task, execution: state.execution }, newSteps: state.steps },
      countInWorkflow,
    },
  );
}

export async function createWorkflow(
  deps: StatusDeps,
  principal: ApplicationPrincipal,
  request: CreateWorkflowRequest,
): Promise<WorkflowCreated> {
  const tasks = request.initialTasks ?? [];
  tasks.forEach(checkKnownSteps);
  const taskKeys = new Set(tasks.map((t) => t.clientTaskKey));
  if (taskKeys.size !== tasks.length)
    throw new AppError('VALIDATION_FAILED', 'clientTaskKey values must be unique within initialTasks');
  const requestHash = fingerprint(request);
  const attempt = () =>
    inFactTransaction(deps, async (session): Promise<WorkflowCreated> => {
      const existing = await session.tx.findWorkflowByKey(principal.applicationId, request.clientWorkflowKey);
      if (existing) {
        if (existing.requestHash !== requestHash) {
          throw new AppError(
            'IDEMPOTENCY_KEY_REUSED',
            `clientWorkflowKey ${request.clientWorkflowKey} was used for a different workflow`,
          );
        }
        const refs = [];
        for (const task of tasks) {
          const taskId = await session.tx.findTaskIdByClientKey(existing.id, task.clientTaskKey);
          const state = taskId ? await session.lockTask(taskId) : null;
          if (state)
            refs.push({
              taskId: state.task.id,
              clientTaskKey: task.clientTaskKey,
              taskVersion: state.task.version.toString(),
            });
        }
        return {
          workflowId: existing.id,
          workflowVersion: existing.version.toString(),
          created: false,
          tasks: refs,
        };
      }
      const workflow = newWorkflowRecord(
        deps.ids,
        {
          tenantId: principal.tenantId,
          applicationId: principal.applicationId,
          clientWorkflowKey: request.clientWorkflowKey,
          ownerId: request.ownerId,
          title: request.title,
          workflowType: request.workflowType ?? null,
          requestHash,
          taskCount: tasks.length,
        },
        session.now,
      );
      await session.tx.write({
        newWorkflow: workflow,
        events: [],
        outbox: [],
        realtime: [workflowProjection(workflow, () => deps.ids.newId(), session.now)],
      });
      const refs = [];
      for (const spec of tasks) {
        const state = await buildTask(deps, principal, workflow, spec, request.ownerId, session.now);
        await commitNewTask(deps, session, principal, state, false);
        refs.push({ taskId: state.task.id, clientTaskKey: spec.clientTaskKey, taskVersion: '1' });
      }
      return {
        workflowId: workflow.id,
        workflowVersion: workflow.version.toString(),
        created: true,
        tasks: refs,
      };
    });
  try {
    return await attempt();
  } catch (error) {
    // A concurrent create with the same key won the insert: answer as its replay.
    if (error instanceof KeyTakenError) return attempt();
    throw error;
  }
}

/** Adds a task to a workflow; the same clientTaskKey returns the same task. */
export async function addWorkflowTask(
  deps: StatusDeps,
  principal: ApplicationPrincipal,
  workflowId: string,
  spec: NewStatusTask,
): Promise<{ taskId: string; taskVersion: string; workflowVersion: string; created: boolean }> {
  checkKnownSteps(spec, 0);
  const attempt = () =>
    inFactTransaction(deps, async (session) => {
      const workflow = await session.tx.lockWorkflow(workflowId);
      if (!workflow || workflow.applicationId !== principal.applicationId)
        throw new AppError('WORKFLOW_NOT_FOUND', `workflow ${workflowId} does not exist`);
      const existingId = await session.tx.findTaskIdByClientKey(workflow.id, spec.clientTaskKey);
      if (existingId) {
        const state = await session.lockTask(existingId);
        return {
          taskId: existingId,
          taskVersion: state!.task.version.toString(),
          workflowVersion: workflow.version.toString(),
          created: false,
        };
      }
      const state = await buildTask(deps, principal, workflow, spec, workflow.ownerId, session.now);
      await commitNewTask(deps, session, principal, state, true);
      return {
        taskId: state.task.id,
        taskVersion: '1',
        workflowVersion: (workflow.version + 1n).toString(),
        created: true,
      };
    });
  try {
    return await attempt();
  } catch (error) {
    if (error instanceof KeyTakenError) return attempt();
    throw error;
  }
}
