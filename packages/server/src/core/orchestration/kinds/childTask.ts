/**
 * The child-task step (kind `task`): starts a task of another published workflow and waits for its end.
 *
 * - Begin: the child's records (task, execution #1, steps, TASK_CREATED, its first orchestration) are
 *   created in the parent's fact transaction through the facts kernel, the way POST /v1/tasks creates a
 *   task, never by calling the tasks context. Its client task key is `child:<parent step id>:<attempt>`
 *   in the parent's workflow, so a repeated begin finds it instead of starting a second one. The child
 *   belongs to the parent's application and workflow. It inherits the parent's owner, ACL and priority
 *   and keeps its own versions, events and channels. It has no callback URL, because
 *   the application hears of the parent.
 * - The child's end: its terminal fact writes CHILD_FINISHED on the parent (facts/taskFamily.ts), and
 *   `childFinished` ends the parent's step in the parent's own transaction. A succeeded child gives its
 *   step outputs as the step's output; a failed or cancelled one fails the step (CHILD_TASK_FAILED,
 *   CHILD_TASK_CANCELLED) and the step's failure policy decides what the parent does.
 * - The parent's step cancelled: CANCEL_CHILD on the child; `cancelChild` cancels it through the tasks
 *   context's own cancel, behind the `ChildTaskCancel` port.
 */
import type { StepDefinition } from '@tdp/protocol';
import type { DefinitionLookup, JsonSchemaValidator, StoredDefinition } from '../../definitions/ports.ts';
import { newTaskState, stepSpecsOf } from '../../facts/newRecords.ts';
import type { StepRecord, TaskState } from '../../facts/records.ts';
import type { FactSession } from '../../facts/session.ts';
import { shownUserMessage } from '../../facts/views.ts';
import { resolveInput } from '../advance.ts';
import { type ConsequenceDeps, failStepAttempt } from '../consequences.ts';
import type { ChildTaskCancel } from '../ports.ts';
import { milestone, orchestrate, platformWorkerProducer, stepOutputs } from '../transitionRecords.ts';
import { completePlatformStep, stillWaiting, waitOnStep } from './finishStep.ts';

export interface ChildTaskDeps {
  definitions: DefinitionLookup;
  schemas: JsonSchemaValidator;
  children: ChildTaskCancel;
}

const producer = 'tdp:orchestrator';

/** The child's client task key: one child per parent step attempt. */
export const childTaskKey = (step: StepRecord) => `child:${step.id}:${step.attempt}`;

/** The step fails on the platform's own account, not retryable (a new attempt would fail the same way). */
function failStep(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  error: { code: string; category: string; message: string },
) {
  return failStepAttempt(deps, session, before, step, {
    producer,
    error: { category: error.category, code: error.code, retryable: false, userMessage: error.message },
    infrastructure: false,
    workerId: null,
    milestone: error.code,
  });
}

type PreparedChild =
  | { ok: true; workflow: StoredDefinition; input: Record<string, unknown> }
  | { ok: false; code: string; message: string };

/** The child's workflow and input (its mapping resolved, then checked against the workflow's schema). */
async function prepareChild(
  deps: ChildTaskDeps,
  before: TaskState,
  definition: StepDefinition,
): Promise<PreparedChild> {
  const options = definition.task!;
  const name = `${options.workflowName}@${options.workflowVersion}`;
  const workflow = await deps.definitions.resolve(
    before.task.tenantId,
    options.workflowName,
    options.workflowVersion,
  );
  if (!workflow)
    return { ok: false, code: 'CHILD_WORKFLOW_UNKNOWN', message: `no workflow ${name} is published` };
  const input = resolveInput(
    { ...definition, inputMapping: options.inputMapping ?? {} },
    before.task.input,
    stepOutputs(before),
  );
  if (!input.ok) return { ok: false, code: 'INPUT_MAPPING_FAILED', message: input.message };
  const errors = deps.schemas.validate(workflow.id, workflow.inputSchema, input.value);
  if (errors.length > 0) {
    const listed = errors.map((e) => `${e.path || '/'} ${e.message}`).join('; ');
    return { ok: false, code: 'CHILD_INPUT_INVALID', message: `the input of ${name}: ${listed}` };
  }
  return { ok: true, workflow, input: input.value };
}

export async function beginChildTask(
  deps: ConsequenceDeps & ChildTaskDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  definition: StepDefinition,
): Promise<void> {
  const existing = await session.tx.findTaskIdByClientKey(before.task.workflowId, childTaskKey(step));
  if (existing) {
    await waitForChild(deps, session, before, step, existing, definition.task!);
    return;
  }
  const prepared = await prepareChild(deps, before, definition);
  if (!prepared.ok) {
    await failStep(deps, session, before, step, { ...prepared, category: 'INPUT' });
    return;
  }
  const childTaskId = await createChild(deps, session, before, step, prepared.workflow, prepared.input);
  await waitForChild(deps, session, before, step, childTaskId, definition.task!);
}

/**
 * Commits the child's creation (task, execution #1, steps, ACL, TASK_CREATED and its first
 * orchestration) in the parent's transaction; returns its id.
 */
async function createChild(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  workflow: StoredDefinition,
  input: Record<string, unknown>,
): Promise<string> {
  const now = session.now;
  const parent = before.task;
  const created = newTaskState(
    deps.ids,
    {
      tenantId: parent.tenantId,
      applicationId: parent.applicationId,
      workflowId: parent.workflowId,
      clientTaskKey: childTaskKey(step),
      name: `${parent.name} › ${step.key}`,
      ownerId: parent.ownerId,
      definition: { id: workflow.id, name: workflow.name, version: workflow.version },
      snapshot: {
        definitionId: workflow.id,
        name: workflow.name,
        version: workflow.version,
        steps: workflow.steps,
        // A child is driven by its parent's engine.
        ...(before.execution.snapshot.engine ? { engine: before.execution.snapshot.engine } : {}),
      },
      steps: stepSpecsOf(workflow.steps, platformWorkerProducer),
      input,
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
        workflow: { name: workflow.name, version: workflow.version },
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
            `execution #1 of ${workflow.name}@${workflow.version} created by step ${step.key} of task ${parent.id}`,
            { parentTaskId: parent.id, parentStepKey: step.key },
            now,
          ),
          ...(started.write.timeline ?? []),
        ],
      },
    },
  );
  return created.task.id;
}

function waitForChild(
  deps: ConsequenceDeps,
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
  deps: ConsequenceDeps,
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
  if (status !== 'FAILED' && status !== 'CANCELLED') return;
  // The child's own words for people, checked as every shown message is.
  const reason = shownUserMessage(child.task.failure);
  await failStep(deps, session, before, step, {
    category: 'STEP',
    ...(status === 'FAILED'
      ? {
          code: 'CHILD_TASK_FAILED',
          message: `The child task of step ${step.key} failed${reason ? `: ${reason}` : ''}`,
        }
      : { code: 'CHILD_TASK_CANCELLED', message: `The child task of step ${step.key} was cancelled` }),
  });
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
