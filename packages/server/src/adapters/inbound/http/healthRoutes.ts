import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { Type } from 'typebox';

export type ReadinessCheck = () => Promise<{ ready: boolean; checks: Record<string, 'ok' | string> }>;

/** What /readyz answers, ready (200) or not (503); what each check says is open-ended. */
const readiness = Type.Object(
  { status: Type.String(), checks: Type.Record(Type.String(), Type.Unknown()) },
  { additionalProperties: true },
);

export function registerHealthRoutes(
  app: FastifyInstance,
  deps: { readiness: ReadinessCheck; metrics: Registry },
): void {
  app.get(
    '/healthz',
    {
      schema: {
        tags: ['operations'],
        summary: 'The process is alive',
        response: { 200: Type.Object({ status: Type.String() }) },
      },
    },
    async () => ({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['operations'],
        summary: 'The database answers and its migrations are current',
        response: { 200: readiness, 503: readiness },
      },
    },
    async (_request, reply) => {
      const { ready, checks } = await deps.readiness();
      return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', checks });
    },
  );

  app.get(
    '/metrics',
    {
      schema: {
        tags: ['operations'],
        summary: 'Prometheus metrics',
        response: {
          200: {
            description: 'The Prometheus text format',
            content: { 'text/plain': { schema: Type.String() } },
          },
        },
      },
    },
    async (_request, reply) => reply.type(deps.metrics.contentType).send(await deps.metrics.metrics()),
  );
}
