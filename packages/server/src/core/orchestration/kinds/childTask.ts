/**
 * The child-task step (kind `task`): starts a task of another published workflow and waits for its end.
 *
 * - Begin: the child's records (task, execution #1, steps, TASK_CREATED, its first orchestration) are
 *   created in the parent's fact transaction through the facts kernel, the way POST /v1/tasks creates a
 *   task, never by calling the tasks context. Its client task key is `child:<parent step id>:<attempt>`
 *   in the parent's workflow, so a repeated begin finds it instead of starting a second one. The child
 *   belongs to the parent's application and workflow. It inherits the parent's owner, ACL and priority
 *   (document 002 §6.1) and keeps its own versions, events and channels. It has no callback URL, because
 *   the application hears of the parent.
 * - The child's end: its terminal fact writes CHILD_FINISHED on the parent (facts/taskFamily.ts), and
 *   `childFinished` ends the parent's step in the parent's own transaction. A succeeded child gives its
 *   step outputs as the step's output; a failed or cancelled one fails the step (CHILD_TASK_FAILED,
 *   CHILD_TASK_CANCELED) and the step's failure policy decides what the parent does.
 * - The parent's step cancelled: CANCEL_CHILD on the child; `cancelChild` cancels it through the tasks
 *   context's own cancel, behind the `ChildTaskCancel` port.
 */
import type { StepDefinition } from '@tdp/protocol';
import type { DefinitionLookup, JsonSchemaValidator } from '../../definitions/ports.ts';
import { newTaskState, stepSpecsOf } from '../../facts/newRecords.ts';
import type { StepRecord, TaskState } from '../../facts/records.ts';
import type { FactSession } from '../../facts/session.ts';
import { resolveInput } from '../advance.ts';
import { type CoordinatorDeps, failStepAttempt } from '../coordinator.ts';
import { milestone, orchestrate, platformWorkerProducer, stepOutputs } from '../platform.ts';
import type { ChildTaskCancel } from '../ports.ts';
import { completePlatformStep, stillWaiting, waitOnStep } from './finishStep.ts';

export interface ChildTaskDeps {
  definitions: DefinitionLookup;
  schemas: JsonSchemaValidator;
  children: ChildTaskCancel;
}

const producer = 'tdp:orchestrator';

/** The child's client task key: one child per parent step attempt. */
export const childTaskKey = (step: StepRecord) => `child:${step.id}:${step.attempt}`;

function failStep(
  deps: CoordinatorDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  code: string,
  category: string,
  message: string,
) {
  return failStepAttempt(deps, session, before, step, {
    producer,
    error: { category, code, retryable: false, userMessage: message },
    infrastructure: false,
    workerId: null,
    milestone: code,
  });
}

export async function beginChildTask(
  deps: CoordinatorDeps & ChildTaskDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  definition: StepDefinition,
): Promise<void> {
  const now = session.now;
  const options = definition.task!;
  const parent = before.task;
  const existing = await session.tx.findTaskIdByClientKey(parent.workflowId, childTaskKey(step));
  if (existing) {
    await waitForChild(deps, session, before, step, existing, options);
    return;
  }
  const child = await deps.definitions.resolve(
    parent.tenantId,
    options.workflowName,
    options.workflowVersion,
  );
  const name = `${options.workflowName}@${options.workflowVersion}`;
  if (!child) {
    await failStep(
      deps,
      session,
      before,
      step,
      'CHILD_WORKFLOW_UNKNOWN',
      'INPUT',
      `no workflow ${name} is published`,
    );
    return;
  }
  const input = resolveInput(
    { ...definition, inputMapping: options.inputMapping ?? {} },
    parent.input,
    stepOutputs(before),
  );
  if (!input.ok) {
    await failStep(deps, session, before, step, 'INPUT_MAPPING_FAILED', 'INPUT', input.message);
    return;
  }
  const inputErrors = deps.schemas.validate(child.id, child.inputSchema, input.value);
  if (inputErrors.length > 0) {
    const listed = inputErrors.map((e) => `${e.path || '/'} ${e.message}`).join('; ');
    await failStep(
      deps,
      session,
      before,
      step,
      'CHILD_INPUT_INVALID',
      'INPUT',
      `the input of ${name}: ${listed}`,
    );
    return;
  }
  const created = newTaskState(
    deps.ids,
    {
      tenantId: parent.tenantId,
      applicationId: parent.applicationId,
      workflowId: parent.workflowId,
      clientTaskKey: childTaskKey(step),
      name: `${parent.name} › ${step.key}`,
      ownerId: parent.ownerId,
      definition: { id: child.id, name: child.name, version: child.version },
      snapshot: { definitionId: child.id, name: child.name, version: child.version, steps: child.steps },
      steps: stepSpecsOf(child.steps, platformWorkerProducer),
      input: input.value,
      priority: parent.priority,
      parent: { taskId: parent.id, stepId: step.id },
    },
    now,
  );
  const started = orchestrate(deps.ids, created, { kind: 'EXECUTION_STARTED' }, now);
  const acl = before.acl ?? (await session.tx.acl(parent.id));
  await session.commit(
    null,
    started.state,
    {
      id: deps.ids.newId(),
      type: 'TASK_CREATED',
      producer,
      payload: {
        workflow: { name: child.name, version: child.version },
        parentTaskId: parent.id,
        parentStepKey: step.key,
      },
      occurredAt: now,
      receivedAt: now,
    },
    {
      write: {
        newTask: { task: started.state.task, execution: started.state.execution },
        newSteps: started.state.steps,
        newAcl: { taskId: created.task.id, entries: acl, createdAt: now },
        schedulingRequests: started.write.schedulingRequests ?? [],
        timers: started.write.timers ?? [],
        timeline: [
          milestone(
            deps.ids,
            created,
            'CREATED',
            `execution #1 of ${name} created by step ${step.key} of task ${parent.id}`,
            { parentTaskId: parent.id, parentStepKey: step.key },
            now,
          ),
          ...(started.write.timeline ?? []),
        ],
      },
    },
  );
  await waitForChild(deps, session, before, step, created.task.id, options);
}

function waitForChild(
  deps: CoordinatorDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  childTaskId: string,
  options: NonNullable<StepDefinition['task']>,
) {
  return waitOnStep(
    deps,
    session,
    before,
    step,
    { kind: 'task', childTaskId, since: session.now.toISOString() },
    {
      producer,
      milestone: 'CHILD_STARTED',
      message: `step ${step.key} started child task ${childTaskId} (${options.workflowName}@${options.workflowVersion})`,
      payload: { childTaskId },
    },
  );
}

/** CHILD_FINISHED: the child of the parent's waiting step ended; the step ends with it. */
export async function childFinished(
  deps: CoordinatorDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord | undefined,
  childTaskId: unknown,
): Promise<void> {
  if (!stillWaiting(step, 'task') || step.waitingFor?.kind !== 'task') return;
  const waitedFor = step.waitingFor.childTaskId;
  if (!waitedFor || waitedFor !== childTaskId) return;
  const child = await session.lockTask(waitedFor);
  if (!child) return;
  const status = child.execution.status;
  if (status === 'SUCCEEDED') {
    await completePlatformStep(deps, session, before, step, stepOutputs(child), {
      producer,
      milestone: 'CHILD_SUCCEEDED',
      message: `step ${step.key}: child task ${child.task.id} succeeded`,
      payload: { childTaskId: child.task.id },
    });
    return;
  }
  if (status !== 'FAILED' && status !== 'CANCELED') return;
  const code = status === 'FAILED' ? 'CHILD_TASK_FAILED' : 'CHILD_TASK_CANCELED';
  const reason = child.task.failure?.userMessage ?? child.task.failure?.code;
  await failStep(
    deps,
    session,
    before,
    step,
    code,
    'STEP',
    status === 'FAILED'
      ? `The child task of step ${step.key} failed${reason ? `: ${reason}` : ''}`
      : `The child task of step ${step.key} was cancelled`,
  );
}

/** CANCEL_CHILD: the parent's step that waited for this task was cancelled; so is the task. */
export async function cancelChild(
  deps: ChildTaskDeps,
  timer: { taskId: string; payload: Record<string, unknown> },
): Promise<void> {
  await deps.children.cancel(
    {
      taskId: timer.taskId,
      tenantId: String(timer.payload.tenantId),
      applicationId: String(timer.payload.applicationId),
    },
    `its parent task ${String(timer.payload.parentTaskId)} was cancelled`,
  );
}
