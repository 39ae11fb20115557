import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';

export type ReadinessCheck = () => Promise<{ ready: boolean; checks: Record<string, 'ok' | string> }>;

export function registerHealthRoutes(
  app: FastifyInstance,
  deps: { readiness: ReadinessCheck; metrics: Registry },
): void {
  app.get('/healthz', { schema: { tags: ['operations'], summary: 'The process is alive' } }, async () => ({
    status: 'ok',
  }));

  app.get(
    '/readyz',
    { schema: { tags: ['operations'], summary: 'The database answers and its migrations are current' } },
    async (_request, reply) => {
      const { ready, checks } = await deps.readiness();
      return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', checks });
    },
  );

  app.get(
    '/metrics',
    { schema: { tags: ['operations'], summary: 'Prometheus metrics' } },
    async (_request, reply) => reply.type(deps.metrics.contentType).send(await deps.metrics.metrics()),
  );
}
