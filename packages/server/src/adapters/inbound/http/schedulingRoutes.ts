/**
 * Fair share at run time (docs/scheduling.md): an application reads its tenant's concurrency keys and
 * sets a key's limit without a redeploy; operators also pause and resume keys, weigh tenants and
 * applications and set an application's tasks-in-flight quota (audited, with a reason).
 */

import { ConcurrencyKeyState } from '@tdp/protocol';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import { AppError } from '../../../core/shared/errors.ts';
import {
  changeConcurrencyKey,
  listConcurrencyKeys,
  type SchedulingControlDeps,
  setApplicationQuota,
  setSchedulingWeight,
} from '../../../core/workers/schedulingControls.ts';
import { principalOf, requireApplication } from './auth.ts';
import { actorOfRequest, type OperatorGate, requireTenantRole } from './operatorAuth.ts';
import { problemResponses, Uuid } from './schemas.ts';

const KeyName = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z][A-Za-z0-9_.-]*$' });
const Limit = Type.Integer({ minimum: 1, maximum: 1_000_000 });
const Reason = Type.String({ minLength: 1, maxLength: 2000 });
const KeyView = ConcurrencyKeyState;
const Weight = Type.Number({ exclusiveMinimum: 0, maximum: 1000 });
const WeightSet = Type.Object({
  scope: Type.Union([Type.Literal('tenant'), Type.Literal('application'), Type.Literal('key')]),
  id: Type.String(),
  weight: Type.Number(),
  auditId: Type.String(),
});
const QuotaSet = Type.Object({
  applicationId: Type.String(),
  tasksInFlight: Type.Union([Type.Integer(), Type.Null()], {
    description: "The application's own limit of unfinished tasks; null: the platform setting applies.",
  }),
  auditId: Type.String(),
});

export function registerSchedulingRoutes(
  app: FastifyInstance,
  deps: { gate: OperatorGate; authenticator: ApiKeyAuthenticator; controls: SchedulingControlDeps },
): void {
  const application = { tags: ['scheduling'], security: [{ apiKey: [] }] };
  const admin = { tags: ['admin'], security: [{ adminToken: [] }] };
  const { controls } = deps;

  app.get(
    '/v1/concurrency-keys',
    {
      onRequest: requireApplication(deps.authenticator),
      schema: {
        ...application,
        summary: "The tenant's concurrency keys: limits, pauses, running and waiting steps",
        response: { 200: Type.Object({ items: Type.Array(KeyView) }), ...problemResponses },
      },
    },
    async (request) => ({ items: await listConcurrencyKeys(controls, principalOf(request).tenantId) }),
  );

  app.put<{ Params: { name: string }; Body: { limit: number } }>(
    '/v1/concurrency-keys/:name',
    {
      onRequest: requireApplication(deps.authenticator),
      schema: {
        ...application,
        summary: "Set a concurrency key's limit at run time (it takes the place of the declared one)",
        params: Type.Object({ name: KeyName }),
        body: Type.Object({ limit: Limit }, { additionalProperties: false }),
        response: { 200: KeyView, ...problemResponses },
      },
    },
    async (request) =>
      changeConcurrencyKey(controls, {
        tenantId: principalOf(request).tenantId,
        name: request.params.name,
        change: { limit: request.body.limit },
      }),
  );

  app.delete<{ Params: { name: string } }>(
    '/v1/concurrency-keys/:name/limit',
    {
      onRequest: requireApplication(deps.authenticator),
      schema: {
        ...application,
        summary: 'Return a concurrency key to the limit its definitions declare',
        params: Type.Object({ name: KeyName }),
        response: { 200: KeyView, ...problemResponses },
      },
    },
    async (request) =>
      changeConcurrencyKey(controls, {
        tenantId: principalOf(request).tenantId,
        name: request.params.name,
        change: { limit: null },
      }),
  );

  const tenantMissing = (id: string) => () => new AppError('TENANT_NOT_FOUND', `tenant ${id} does not exist`);

  app.get<{ Params: { tenantId: string } }>(
    '/admin/v1/tenants/:tenantId/concurrency-keys',
    {
      onRequest: deps.gate('viewer', 'tenants'),
      schema: {
        ...admin,
        summary: "A tenant's concurrency keys",
        params: Type.Object({ tenantId: Uuid }),
        response: { 200: Type.Object({ items: Type.Array(KeyView) }), ...problemResponses },
      },
    },
    async (request) => {
      requireTenantRole(request, 'viewer', request.params.tenantId, tenantMissing(request.params.tenantId));
      return { items: await listConcurrencyKeys(controls, request.params.tenantId) };
    },
  );

  app.put<{
    Params: { tenantId: string; name: string };
    Body: { limit?: number | null; paused?: boolean; reason: string };
  }>(
    '/admin/v1/tenants/:tenantId/concurrency-keys/:name',
    {
      onRequest: deps.gate('operator', 'tenants'),
      schema: {
        ...admin,
        summary: "Change a tenant's concurrency key: its limit, or pause and resume it (audited)",
        description:
          "A paused key's steps wait (nothing fails; running ones go on) until it is resumed. A limit of null returns to the declared one.",
        params: Type.Object({ tenantId: Uuid, name: KeyName }),
        body: Type.Object(
          {
            limit: Type.Optional(Type.Union([Limit, Type.Null()])),
            paused: Type.Optional(Type.Boolean()),
            reason: Reason,
          },
          { additionalProperties: false },
        ),
        response: { 200: KeyView, ...problemResponses },
      },
    },
    async (request) => {
      const { tenantId, name } = request.params;
      requireTenantRole(request, 'operator', tenantId, tenantMissing(tenantId));
      const { reason, ...change } = request.body;
      return changeConcurrencyKey(controls, {
        tenantId,
        name,
        change,
        operator: { actor: actorOfRequest(request), reason },
      });
    },
  );

  /** A weight is set by an operator of the tenant it weighs in: platform-wide for a tenant's own. */
  const weightRoute = (scope: 'tenant' | 'application') =>
    app.put<{ Params: { id: string }; Body: { weight: number; reason: string } }>(
      `/admin/v1/${scope === 'tenant' ? 'tenants' : 'applications'}/:id/scheduling-weight`,
      {
        onRequest: deps.gate('operator', scope === 'tenant' ? 'platform' : 'tenants'),
        schema: {
          ...admin,
          summary:
            scope === 'tenant'
              ? "A tenant's fair-share weight against the other tenants (platform-wide operator; audited)"
              : "An application's fair-share weight against its tenant's other applications (audited)",
          params: Type.Object({ id: Uuid }),
          body: Type.Object({ weight: Weight, reason: Reason }, { additionalProperties: false }),
          response: { 200: WeightSet, ...problemResponses },
        },
      },
      async (
        request: FastifyRequest<{ Params: { id: string }; Body: { weight: number; reason: string } }>,
      ) => {
        const { id } = request.params;
        const missing = () =>
          scope === 'tenant'
            ? new AppError('TENANT_NOT_FOUND', `tenant ${id} does not exist`)
            : new AppError('APPLICATION_NOT_FOUND', `application ${id} does not exist`);
        const tenantId = await controls.store.tenantOf(scope, id);
        if (!tenantId) throw missing();
        requireTenantRole(request, 'operator', tenantId, missing);
        return setSchedulingWeight(controls, {
          scope,
          id,
          weight: request.body.weight,
          reason: request.body.reason,
          actor: actorOfRequest(request),
          tenantId,
        });
      },
    );
  weightRoute('tenant');
  weightRoute('application');

  app.put<{ Params: { id: string; key: string }; Body: { weight: number; reason: string } }>(
    '/admin/v1/applications/:id/fairness-keys/:key/weight',
    {
      onRequest: deps.gate('operator', 'tenants'),
      schema: {
        ...admin,
        summary:
          "A fairness key's weight against its application's other keys (operator of its tenant; audited)",
        description:
          'Takes the place of the weight the key’s tasks were created with (`fairness.weight`), for the tasks that arrive from now on.',
        params: Type.Object({ id: Uuid, key: Type.String({ minLength: 1, maxLength: 200 }) }),
        body: Type.Object({ weight: Weight, reason: Reason }, { additionalProperties: false }),
        response: { 200: WeightSet, ...problemResponses },
      },
    },
    async (request) => {
      const { id, key } = request.params;
      const missing = () => new AppError('APPLICATION_NOT_FOUND', `application ${id} does not exist`);
      const tenantId = await controls.store.tenantOf('application', id);
      if (!tenantId) throw missing();
      requireTenantRole(request, 'operator', tenantId, missing);
      return setSchedulingWeight(controls, {
        scope: 'key',
        id: `${id}:${key}`,
        weight: request.body.weight,
        reason: request.body.reason,
        actor: actorOfRequest(request),
        tenantId,
      });
    },
  );

  app.put<{ Params: { id: string }; Body: { tasksInFlight: number | null; reason: string } }>(
    '/admin/v1/applications/:id/quota',
    {
      onRequest: deps.gate('operator', 'tenants'),
      schema: {
        ...admin,
        summary: "Set or remove an application's tasks-in-flight quota (operator of its tenant; audited)",
        description:
          'Unfinished tasks the application may have; a create beyond gets 429 `TASKS_IN_FLIGHT_LIMIT`. null removes it: the platform setting `TDP_TASKS_IN_FLIGHT_LIMIT` applies again. Creates see a change within a second.',
        params: Type.Object({ id: Uuid }),
        body: Type.Object(
          { tasksInFlight: Type.Union([Limit, Type.Null()]), reason: Reason },
          { additionalProperties: false },
        ),
        response: { 200: QuotaSet, ...problemResponses },
      },
    },
    async (request) => {
      const { id } = request.params;
      const missing = () => new AppError('APPLICATION_NOT_FOUND', `application ${id} does not exist`);
      const tenantId = await controls.store.tenantOf('application', id);
      if (!tenantId) throw missing();
      requireTenantRole(request, 'operator', tenantId, missing);
      return setApplicationQuota(controls, {
        applicationId: id,
        tasksInFlight: request.body.tasksInFlight,
        reason: request.body.reason,
        actor: actorOfRequest(request),
        tenantId,
      });
    },
  );
}
