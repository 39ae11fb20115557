/**
 * Signals to tasks: an application's to its own tasks (API key), and the operator's to any task (admin
 * token, with a reason kept with the fact). Both need an Idempotency-Key; its retry gets the first answer.
 */
import { OperatorSignalRequest, SendSignalRequest, SignalName, SignalSent } from '@tdp/protocol';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import { type SignalDeps, type SignalSender, sendSignal } from '../../../core/orchestration/kinds/signal.ts';
import { principalOf, requireApplication } from './auth.ts';
import { actorOfRequest, type OperatorGate, requireTaskRole } from './operatorAuth.ts';
import { requireIdempotencyKey } from './problems.ts';
import { emptyBodyAsObject, IdempotencyKeyHeader, problemResponses, Uuid } from './schemas.ts';

export interface SignalRouteDeps {
  authenticator: ApiKeyAuthenticator;
  gate: OperatorGate;
  taskTenant: (taskId: string) => Promise<string | null>;
  signals: SignalDeps;
}

interface SignalRoute<Body> {
  Params: { id: string; name: string };
  Body: Body;
  Headers: { 'idempotency-key'?: string };
}

const description =
  "Ends the wait of the task's signal step of this name, with `payload` as its output; a signal sent before " +
  "the step is reached is kept for it (docs/step-kinds.md). A payload the step's schema refuses is 422 " +
  'SIGNAL_PAYLOAD_INVALID and is not kept. Requires `Idempotency-Key`: a retry with the same key and body ' +
  'returns the first answer (200).';

const schema = (body: typeof SendSignalRequest | typeof OperatorSignalRequest) => ({
  params: Type.Object({ id: Uuid, name: SignalName }),
  headers: IdempotencyKeyHeader,
  body,
  response: { 200: SignalSent, 202: SignalSent, ...problemResponses },
});

async function send(
  deps: SignalDeps,
  sender: SignalSender,
  request: {
    params: { id: string; name: string };
    body: { payload?: unknown };
    headers: { 'idempotency-key'?: string };
  },
  reply: FastifyReply,
) {
  const answer = await sendSignal(deps, sender, {
    taskId: request.params.id,
    name: request.params.name,
    payload: request.body.payload,
    idempotencyKey: request.headers['idempotency-key']!,
  });
  if (answer.body.replayed) reply.header('idempotent-replayed', 'true');
  return reply.code(answer.status).send(answer.body);
}

export function registerSignalRoutes(app: FastifyInstance, deps: SignalRouteDeps): void {
  const preValidation = [emptyBodyAsObject, requireIdempotencyKey];
  app.post<SignalRoute<SendSignalRequest>>(
    '/v1/tasks/:id/signals/:name',
    {
      onRequest: requireApplication(deps.authenticator),
      preValidation,
      schema: {
        tags: ['tasks'],
        summary: 'Send a signal to a task',
        description,
        security: [{ apiKey: [] }],
        ...schema(SendSignalRequest),
      },
    },
    (request, reply) =>
      send(deps.signals, { kind: 'application', principal: principalOf(request) }, request, reply),
  );
  app.post<SignalRoute<OperatorSignalRequest>>(
    '/admin/v1/tasks/:id/signals/:name',
    {
      onRequest: deps.gate('operator', 'tenants'),
      preValidation,
      schema: {
        tags: ['admin'],
        summary: 'Send a signal to a task as the operator, with a reason',
        description: `${description} The reason is kept with the fact (producer \`operator:<name>\`), shown in the timeline, and audited. Needs the operator role for the task's tenant.`,
        security: [{ adminToken: [] }],
        ...schema(OperatorSignalRequest),
      },
    },
    async (request, reply) => {
      await requireTaskRole(request, 'operator', request.params.id, deps.taskTenant);
      return send(
        deps.signals,
        { kind: 'operator', reason: request.body.reason, actor: actorOfRequest(request) },
        request,
        reply,
      );
    },
  );
}
