/**
 * What the schemathesis run (npm run fuzz) found, pinned: the OpenAPI document says what every operation
 * answers (errors as problem+json, the credentials it takes), and odd input is a 4xx problem, never a 500.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { coordinator } from '../../../test/statusFixture.ts';
import { newId } from '../../protocol/src/ids.ts';
import { translateDatabaseError } from '../src/adapters/outbound/postgres/database.ts';
import { AppError } from '../src/core/shared/errors.ts';

let h: Harness;
let doc: any;

beforeAll(async () => {
  h = await startHarness();
  doc = await (await fetch(`${h.url}/openapi.json`)).json();
});
afterAll(async () => {
  await h.close();
});

function operations(): { name: string; operation: any }[] {
  return Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({
      name: `${method.toUpperCase()} ${path}`,
      operation,
    })),
  );
}

/** A request fetch will not send (a method with no body and no content type). */
function rawRequest(
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; type: string; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${h.url}${path}`, { method, headers }, (res) => {
      let text = '';
      res.on('data', (chunk) => {
        text += chunk;
      });
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          type: String(res.headers['content-type']),
          body: JSON.parse(text),
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the OpenAPI document', () => {
  it('documents a success and problem+json errors for every operation', () => {
    const wrong = operations().flatMap(({ name, operation }) => {
      const statuses = Object.keys(operation.responses ?? {});
      const problems = ['4XX', '5XX'].filter(
        (s) => !operation.responses?.[s]?.content?.['application/problem+json'],
      );
      return [
        ...(statuses.some((s) => /^2/.test(s)) ? [] : [`${name}: no success status`]),
        ...problems.map((s) => `${name}: ${s} is not problem+json`),
      ];
    });
    expect(wrong).toEqual([]);
  });

  it('names the credential of every operation but the health endpoints', () => {
    const open = operations()
      .filter(({ operation }) => !operation.security)
      .map(({ name }) => name);
    expect(open.sort()).toEqual(['GET /healthz', 'GET /metrics', 'GET /readyz']);
    const security = (name: string) =>
      operations()
        .find((o) => o.name === name)
        ?.operation.security.flatMap(Object.keys);
    expect(security('GET /v1/me/tasks')).toEqual(['userToken']);
    expect(security('GET /v1/me/task-stream')).toEqual(['userToken']);
    expect(security('POST /v1/task-events')).toEqual(['executionToken', 'apiKey']);
    expect(security('GET /v1/workers')).toEqual(['apiKey', 'adminToken']);
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual([
      'adminToken',
      'apiKey',
      'executionToken',
      'userToken',
      'workerKey',
    ]);
  });

  it('documents the event streams as text/event-stream and an unready /readyz as 503', () => {
    for (const path of ['/v1/me/task-stream', '/v1/workers/{id}/commands'])
      expect(doc.paths[path].get.responses['200'].content).toHaveProperty('text/event-stream');
    expect(doc.paths['/readyz'].get.responses).toHaveProperty('503');
    expect(doc.paths['/metrics'].get.responses['200'].content).toHaveProperty('text/plain');
  });
});

describe('odd input is a 4xx problem, not a 500', () => {
  it('refuses a second tenant of the same name with 409 TENANT_NAME_TAKEN', async () => {
    const first = await h.request('POST', '/admin/v1/tenants', {
      token: h.adminToken,
      body: { name: 'twice' },
    });
    expect(first.status).toBe(201);
    const second = await h.request('POST', '/admin/v1/tenants', {
      token: h.adminToken,
      body: { name: 'twice' },
    });
    expect(second.status).toBe(409);
    expect(second.body.code).toBe('TENANT_NAME_TAKEN');
  });

  it('refuses text with a NUL character (in a text column and in jsonb), storing nothing', async () => {
    const tenant = await h.request('POST', '/admin/v1/tenants', {
      token: h.adminToken,
      body: { name: 'nul\u0000name' },
    });
    expect(tenant.status).toBe(400);
    expect(tenant.headers.get('content-type')).toContain('application/problem+json');
    expect(tenant.body.code).toBe('VALIDATION_FAILED');
    const tenants = await h.request('GET', '/admin/v1/tenants', { token: h.adminToken });
    expect(tenants.body.map((t: { name: string }) => t.name)).not.toContain('nul\u0000name');

    const app = await h.createApplication();
    const definition = await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: {
        name: 'nul-input',
        version: '1',
        inputSchema: { type: 'object', description: 'a\u0000b' },
        steps: [{ key: 'one', capability: 'demo.noop', capabilityVersion: '1' }],
      },
    });
    expect(definition.status).toBe(400);
    expect(definition.body.code).toBe('VALIDATION_FAILED');
    expect(definition.body.detail).toContain('NUL');
  });

  it('refuses a definition version past the integer column with 400', async () => {
    const app = await h.createApplication();
    const define = (version: number) =>
      h.request('POST', `/admin/v1/applications/${app.applicationId}/operation-definitions`, {
        token: h.adminToken,
        body: {
          operationCode: 'FILE.PREPARE',
          version,
          displayName: 'Prepare',
          producerPattern: 'file-service',
          allowedEventTypes: ['STEP_STARTED'],
          dataSchemas: {},
        },
      });
    expect((await define(1)).status).toBe(201);
    const res = await define(2 ** 56);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_FAILED');
    // Past the schemas, a number PostgreSQL cannot hold is the client's error too.
    const outOfRange = translateDatabaseError(Object.assign(new Error('out of range'), { code: '22003' }));
    expect(outOfRange).toBeInstanceOf(AppError);
    expect((outOfRange as AppError).code).toBe('VALIDATION_FAILED');
  });

  it('answers a QUERY request without a content type with a 4xx problem', async () => {
    const res = await rawRequest('QUERY', '/healthz');
    expect(res.status).toBe(415);
    expect(res.type).toContain('application/problem+json');
    expect(res.body.code).toBe('UNSUPPORTED_MEDIA_TYPE');
  });

  it('answers headers too large for Node to read with a 431 problem', async () => {
    const res = await rawRequest('GET', '/healthz', { 'last-event-id': 'x'.repeat(20_000) });
    expect(res.status).toBe(431);
    expect(res.type).toContain('application/problem+json');
    expect(res.body.code).toBe('HEADERS_TOO_LARGE');
  });

  it('takes a path parameter as long as its schema allows, and refuses a longer path as a problem', async () => {
    const app = await h.createApplication();
    // No such task: the route answers (404), where the router used to refuse the path (414, not a problem).
    const ref = 'r'.repeat(255);
    const put = await h.request('PUT', `/v1/tasks/${newId()}/external-refs/order/${ref}`, {
      token: app.apiKey,
    });
    expect(put.status).toBe(404);
    expect(put.body.code).toBe('TASK_NOT_FOUND');

    const tooLong = await h.request('GET', `/v1/external-refs/order/${'r'.repeat(4000)}`, {
      token: app.apiKey,
    });
    expect(tooLong.status).toBe(400);
    expect(tooLong.headers.get('content-type')).toContain('application/problem+json');
    expect(tooLong.body.code).toBe('VALIDATION_FAILED');
  });

  // Found by stateMachine.property.test.ts: endTask threw (a 500) where it should refuse.
  it('refuses the coordinator completing a task that is being cancelled with 409, changing nothing', async () => {
    const c = await coordinator(h);
    const { taskId, ctx } = await c.runningContext();
    await c.report(ctx, c.event(ctx));
    const cancel = await c.call('POST', `/v1/tasks/${taskId}:cancel`, {}, { 'idempotency-key': newId() });
    expect(cancel.status).toBe(200);
    const before = await c.task(taskId);
    const completed = await c.call('POST', '/v1/task-events', {
      eventId: newId(),
      taskId,
      producerId: 'coordinator',
      sourceSeq: 1,
      eventType: 'TASK_COMPLETED',
    });
    expect(completed.status).toBe(409);
    expect(completed.body.code).toBe('INVALID_TRANSITION');
    expect((await c.task(taskId)).task.version).toBe(before.task.version);
  });
});
