/** Helpers for status-service tests: a coordinator application, workflows with known steps, events. */
import { newId } from '../packages/protocol/src/ids.ts';
import type { Harness } from './harness.ts';

export interface Context {
  workflowId: string;
  taskId: string;
  stepId: string;
  stepAttempt: number;
  executionId: string;
  operationCode: string;
  producerId: string;
  executionToken: string;
  executionHandle: string;
  taskVersion: string;
}

export const documentSteps = [
  { stepId: '01_prepare', operationCode: 'FILE.PREPARE', expectedProducer: 'file-service' },
  {
    stepId: '02_parse',
    operationCode: 'DOCUMENT.PARSE',
    expectedProducer: 'document-parser',
    dependsOn: ['01_prepare'],
  },
];

export async function coordinator(h: Harness) {
  const app = await h.createApplication();
  const call = (
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
    token = app.apiKey,
  ) =>
    h.request(method, path, {
      token,
      ...(body !== undefined ? { body } : {}),
      ...(headers ? { headers } : {}),
    });

  async function createWorkflow(
    options: { key?: string; ownerId?: string; tasks?: Record<string, unknown>[] } = {},
  ) {
    const res = await call('POST', '/v1/workflows', {
      clientWorkflowKey: options.key ?? `wf-${newId()}`,
      ownerId: options.ownerId ?? 'user-42',
      title: 'Process the uploaded documents',
      initialTasks: options.tasks ?? [
        { clientTaskKey: 'parse-contract', title: 'Parse the contract', knownSteps: documentSteps },
      ],
    });
    if (res.status !== 201 && res.status !== 200)
      throw new Error(`create workflow: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as {
      workflowId: string;
      workflowVersion: string;
      tasks: { taskId: string; clientTaskKey: string; taskVersion: string }[];
    };
  }

  async function activate(taskId: string, stepId: string, attempt?: number): Promise<Context> {
    const res = await call(
      'POST',
      `/v1/tasks/${taskId}/steps/${stepId}:activate`,
      attempt ? { attempt } : undefined,
    );
    if (res.status !== 201 && res.status !== 200)
      throw new Error(`activate: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as Context;
  }

  /** A task with known steps and its first step activated. */
  async function runningContext(stepId = '01_prepare') {
    const wf = await createWorkflow();
    const taskId = wf.tasks[0]!.taskId;
    return { wf, taskId, ctx: await activate(taskId, stepId) };
  }

  function event(ctx: Context, overrides: Record<string, unknown> = {}) {
    return {
      eventId: newId(),
      workflowId: ctx.workflowId,
      taskId: ctx.taskId,
      taskAttempt: 1,
      stepId: ctx.stepId,
      stepAttempt: ctx.stepAttempt,
      executionId: ctx.executionId,
      operationCode: ctx.operationCode,
      producerId: ctx.producerId,
      sourceSeq: 1,
      eventType: 'STEP_STARTED',
      ...overrides,
    };
  }

  const report = (ctx: Context, body: Record<string, unknown>) =>
    call('POST', '/v1/task-events', body, undefined, ctx.executionToken);

  const task = async (taskId: string) => (await call('GET', `/v1/tasks/${taskId}`)).body;

  return { app, call, createWorkflow, activate, runningContext, event, report, task };
}
