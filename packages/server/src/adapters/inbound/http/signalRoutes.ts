import { SendSignalRequest, SignalName, SignalSent } from '@tdp/protocol';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import { type SignalDeps, sendSignal } from '../../../core/orchestration/kinds/signal.ts';
import { fingerprint } from '../../../core/shared/canonicalJson.ts';
import { principalOf, requireApplication } from './auth.ts';
import { requireIdempotencyKey } from './problems.ts';
import { emptyBodyAsObject, IdempotencyKeyHeader, problemResponses, Uuid } from './schemas.ts';

export interface SignalRouteDeps {
  authenticator: ApiKeyAuthenticator;
  signals: SignalDeps;
}

export function registerSignalRoutes(app: FastifyInstance, deps: SignalRouteDeps): void {
  app.post<{
    Params: { id: string; name: string };
    Body: SendSignalRequest;
    Headers: { 'idempotency-key'?: string };
  }>(
    '/v1/tasks/:id/signals/:name',
    {
      onRequest: requireApplication(deps.authenticator),
      preValidation: async (request, reply) => {
        await emptyBodyAsObject(request);
        return requireIdempotencyKey(request, reply);
      },
      schema: {
        tags: ['tasks'],
        summary: 'Send a signal to a task',
        description:
          "Ends the wait of the task's signal step of this name, with `payload` as its output; a signal sent before " +
          "the step is reached is kept for it (docs/step-kinds.md). A payload the step's schema refuses is 422 " +
          'SIGNAL_PAYLOAD_INVALID and is not kept. Requires `Idempotency-Key`: a retry with the same key and body ' +
          'returns the first answer (200).',
        security: [{ apiKey: [] }],
        params: Type.Object({ id: Uuid, name: SignalName }),
        headers: IdempotencyKeyHeader,
        body: SendSignalRequest,
        response: { 200: SignalSent, 202: SignalSent, ...problemResponses },
      },
    },
    async (request, reply) => {
      const answer = await sendSignal(deps.signals, principalOf(request), {
        taskId: request.params.id,
        name: request.params.name,
        payload: request.body.payload,
        idempotencyKey: request.headers['idempotency-key']!,
        requestHash: fingerprint({ name: request.params.name, payload: request.body.payload ?? null }),
      });
      if (answer.body.replayed) reply.header('idempotent-replayed', 'true');
      return reply.code(answer.status).send(answer.body);
    },
  );
}
