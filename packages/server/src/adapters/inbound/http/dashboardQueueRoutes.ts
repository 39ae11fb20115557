/**
 * The dashboard's queue page (`/dashboard/api/queue`): fair share as the operator's tenants see it, and
 * the operator's changes to it — a concurrency key's limit, pause and resume, a tenant's or an
 * application's weight. The changes go through the same use cases as the admin API, with the same role
 * rules and a reason, audited with the session's operator.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { type QueueReads, queueOverview, shareWindowMinutes } from '../../../core/operations/queue.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import {
  changeConcurrencyKey,
  type SchedulingControlDeps,
  setSchedulingWeight,
} from '../../../core/workers/schedulingControls.ts';
import { actorOfRequest, type OperatorGate, reachOf, requireTenantRole } from './operatorAuth.ts';
import { Uuid } from './schemas.ts';

export interface DashboardQueueDeps {
  reads: QueueReads;
  controls: SchedulingControlDeps;
  clock: Clock;
}

const KeyName = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z][A-Za-z0-9_.-]*$' });
const Reason = Type.String({ minLength: 1, maxLength: 2000, pattern: '\\S' });
const KeyChange = Type.Object(
  {
    limit: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1_000_000 }), Type.Null()])),
    paused: Type.Optional(Type.Boolean()),
    reason: Reason,
  },
  { additionalProperties: false },
);
const WeightChange = Type.Object(
  { weight: Type.Number({ exclusiveMinimum: 0, maximum: 1000 }), reason: Reason },
  { additionalProperties: false },
);

export function registerDashboardQueueRoutes(
  app: FastifyInstance,
  gate: OperatorGate,
  deps: DashboardQueueDeps,
): void {
  const hide = true;

  app.get<{ Querystring: { minutes?: string } }>(
    '/dashboard/api/queue',
    { schema: { hide }, onRequest: gate('viewer', 'tenants') },
    async (request) => queueOverview(deps, reachOf(request), shareWindowMinutes(request.query.minutes)),
  );

  app.put<{
    Params: { tenantId: string; name: string };
    Body: { limit?: number | null; paused?: boolean; reason: string };
  }>(
    '/dashboard/api/queue/tenants/:tenantId/keys/:name',
    {
      schema: { hide, params: Type.Object({ tenantId: Uuid, name: KeyName }), body: KeyChange },
      onRequest: gate('operator', 'tenants'),
    },
    async (request) => {
      const { tenantId, name } = request.params;
      requireTenantRole(request, 'operator', tenantId, tenantMissing(tenantId));
      const { reason, ...change } = request.body;
      return changeConcurrencyKey(deps.controls, {
        tenantId,
        name,
        change,
        operator: { actor: actorOfRequest(request), reason: reason.trim() },
      });
    },
  );

  // A tenant's weight is against every other tenant: the platform's to set. An application's is
  // within its tenant: an operator there sets it.
  const weightRoute = (scope: 'tenant' | 'application', onRequest: ReturnType<OperatorGate>) =>
    app.put<{ Params: { id: string }; Body: { weight: number; reason: string } }>(
      `/dashboard/api/queue/${scope === 'tenant' ? 'tenants' : 'applications'}/:id/weight`,
      { schema: { hide, params: Type.Object({ id: Uuid }), body: WeightChange }, onRequest },
      async (request) => {
        const { id } = request.params;
        const missing =
          scope === 'tenant'
            ? tenantMissing(id)
            : () => new AppError('APPLICATION_NOT_FOUND', `application ${id} does not exist`);
        const tenantId = await deps.controls.store.tenantOf(scope, id);
        if (!tenantId) throw missing();
        requireTenantRole(request, 'operator', tenantId, missing);
        return setSchedulingWeight(deps.controls, {
          scope,
          id,
          weight: request.body.weight,
          reason: request.body.reason.trim(),
          actor: actorOfRequest(request),
          tenantId,
        });
      },
    );
  weightRoute('tenant', gate('operator', 'platform'));
  weightRoute('application', gate('operator', 'tenants'));
}

const tenantMissing = (id: string) => () => new AppError('TENANT_NOT_FOUND', `tenant ${id} does not exist`);
