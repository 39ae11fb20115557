/**
 * The coordinator's status API through the SDK against a real server, and a guard that the client
 * covers every operation the server offers an application's API key.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { createTdpClient, type TdpClient } from '../src/index.ts';

let h: Harness;
let tdp: TdpClient;

beforeAll(async () => {
  h = await startHarness();
  tdp = createTdpClient({ baseUrl: h.url, apiKey: (await h.createApplication()).apiKey });
});
afterAll(() => h.close());

describe('coordinator', () => {
  it('activates a known step, reports its events and heartbeats, registers a dynamic step', async () => {
    const created = await tdp.createWorkflow({
      clientWorkflowKey: `agents-${newId()}`,
      ownerId: 'owner-1',
      title: 'Research',
      initialTasks: [
        {
          clientTaskKey: 'agent',
          title: 'Research agent',
          knownSteps: [{ stepId: 'agent', operationCode: 'AGENT.RUN', expectedProducer: 'agent-service' }],
          dynamicRegistrationPolicy: { allowedChildOperations: ['SEARCH.*'] },
        },
      ],
    });
    const taskId = created.tasks[0]!.taskId;
    const context = await tdp.coordinator.activateStep(taskId, 'agent');
    expect(context).toMatchObject({ taskId, stepId: 'agent', created: true });

    const started = {
      executionHandle: context.executionHandle,
      eventId: newId(),
      eventType: 'STEP_STARTED',
    } as const;
    expect(await tdp.coordinator.reportEvent({ ...started, sourceSeq: 1 })).toMatchObject({
      accepted: true,
      duplicate: false,
    });
    expect((await tdp.coordinator.reportEvent({ ...started, sourceSeq: 1 })).duplicate).toBe(true);

    const batch = await tdp.coordinator.reportEvents([
      {
        executionHandle: context.executionHandle,
        eventId: newId(),
        eventType: 'STEP_PROGRESS',
        sourceSeq: 2,
        progress: { percent: 40 },
      },
    ]);
    expect(batch.results).toHaveLength(1);
    expect(batch.results[0]).toMatchObject({ index: 0 });

    const beats = await tdp.coordinator.reportHeartbeats([
      { executionHandle: context.executionHandle, heartbeatSeq: 1 },
    ]);
    expect(beats.results.map((r) => r.outcome)).toEqual(['ACCEPTED']);

    const dynamic = await tdp.coordinator.registerExecution(taskId, {
      clientStepKey: 'search-1',
      operationCode: 'SEARCH.WEB',
      producerId: 'search-service',
    });
    expect(dynamic).toMatchObject({ stepId: 'dyn_search-1', created: true });
    expect((await tdp.getTask(taskId)).execution.steps.map((s) => s.key).sort()).toEqual([
      'agent',
      'dyn_search-1',
    ]);
  });

  it('lists worker sessions', async () => {
    expect(await tdp.listWorkers()).toEqual([]);
  });
});

/**
 * Every operation of the OpenAPI document an API key may call, and how the SDK calls it. A new
 * operation fails this test until the client has it (or it is listed as not for a backend).
 */
const covered: Record<string, string> = {
  'POST /v1/workflow-definitions': 'publishWorkflowDefinition',
  'GET /v1/workflow-definitions': 'listWorkflowDefinitions',
  'GET /v1/workflow-definitions/{name}/versions/{version}': 'getWorkflowDefinition',
  'POST /v1/tasks': 'createTask',
  'GET /v1/tasks': 'listTasks',
  'GET /v1/tasks/{id}': 'getTask',
  'POST /v1/tasks/{id}:cancel': 'cancelTask',
  'POST /v1/tasks/{id}:retry': 'retryTask',
  'GET /v1/tasks/{id}/events': 'listTaskEvents',
  'GET /v1/tasks/{id}/timeline': 'getTaskTimeline',
  'GET /v1/tasks/{id}/callbacks': 'listCallbackDeliveries',
  'POST /v1/callbacks/{id}:redeliver': 'redeliverCallback',
  'POST /v1/tasks/status:batchGet': 'batchGetTaskStatus',
  'PATCH /v1/tasks/{id}/classification': 'classifyTask',
  'PUT /v1/tasks/{id}/external-refs/{refType}/{refValue}': 'setExternalRef',
  'GET /v1/external-refs/{refType}/{refValue}': 'findTaskByExternalRef',
  'POST /v1/workflows': 'createWorkflow',
  'GET /v1/workflows/{id}': 'getWorkflow',
  'POST /v1/workflows/{id}/tasks': 'addWorkflowTask',
  'POST /v1/tasks/{id}/acl': 'grantTaskAccess',
  'DELETE /v1/tasks/{id}/acl/{principalType}/{principalId}': 'revokeTaskAccess',
  'POST /v1/realtime/connection-token': 'createConnectionToken',
  'POST /v1/realtime/subscription-token': 'createSubscriptionToken',
  'POST /v1/user-tokens': 'createUserToken',
  'POST /v1/broadcasts': 'broadcastToTenant',
  'GET /v1/workers': 'listWorkers',
  'POST /v1/tasks/{id}/signals/{name}': 'sendSignal',
  'GET /v1/concurrency-keys': 'concurrencyKeys.list',
  'PUT /v1/concurrency-keys/{name}': 'concurrencyKeys.setLimit',
  'DELETE /v1/concurrency-keys/{name}/limit': 'concurrencyKeys.resetLimit',
  'POST /v1/schedules': 'schedules.create',
  'GET /v1/schedules': 'schedules.list',
  'GET /v1/schedules/{id}': 'schedules.get',
  'POST /v1/schedules/{id}:pause': 'schedules.pause',
  'POST /v1/schedules/{id}:resume': 'schedules.resume',
  'POST /v1/tasks/{taskId}/steps/{stepId}:activate': 'coordinator.activateStep',
  'POST /v1/tasks/{id}/executions:register': 'coordinator.registerExecution',
  'POST /v1/task-events': 'coordinator.reportEvent',
  'POST /v1/task-events:batch': 'coordinator.reportEvents',
  'POST /v1/task-heartbeats:batch': 'coordinator.reportHeartbeats',
};

describe('coverage of the public API', () => {
  it('has a method for every operation an API key may call', async () => {
    const document = (await h.request('GET', '/openapi.json')).body as {
      paths: Record<string, Record<string, { security?: Record<string, string[]>[] }>>;
    };
    const forApiKeys = Object.entries(document.paths).flatMap(([path, operations]) =>
      Object.entries(operations)
        .filter(([, operation]) => operation.security?.some((scheme) => 'apiKey' in scheme))
        .map(([method]) => `${method.toUpperCase()} ${path}`),
    );
    expect(forApiKeys.sort()).toEqual(Object.keys(covered).sort());
    const client = tdp as unknown as Record<string, Record<string, unknown>>;
    for (const method of Object.values(covered)) {
      // `coordinator.reportEvent`: a method of one of the client's parts.
      const [part, name] = method.includes('.') ? method.split('.') : [null, method];
      const owner = part ? client[part]! : (client as Record<string, unknown>);
      expect(typeof owner[name], method).toBe('function');
    }
  });
});
