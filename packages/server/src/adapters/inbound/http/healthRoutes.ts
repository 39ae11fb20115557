import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { problem, sendProblem } from './problems.ts';

export type ReadinessCheck = () => Promise<{
  ready: boolean;
  checks: Record<string, 'ok' | string>;
  loops?: unknown[];
}>;

export function registerHealthRoutes(
  app: FastifyInstance,
  deps: { readiness: ReadinessCheck; metrics: Registry },
): void {
  // Liveness: the process answers HTTP. Database faults and stuck loops show in /readyz; a restart cures
  // neither (every database wait has a deadline, and restarting every replica in an outage helps nobody).
  app.get('/healthz', { schema: { tags: ['operations'], summary: 'The process is alive' } }, async () => ({
    status: 'ok',
  }));

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['operations'],
        summary:
          'Ready for work: the pool hands out a connection that answers, migrations are current, no loop is stuck',
      },
    },
    async (request, reply) => {
      const { ready, checks, loops } = await deps.readiness();
      if (ready) return reply.send({ status: 'ready', checks });
      const failing = Object.entries(checks)
        .filter(([, value]) => value !== 'ok')
        .map(([name, value]) => `${name}: ${value}`)
        .join('; ');
      return sendProblem(reply, {
        ...problem('NOT_READY', failing, undefined, request.url),
        checks,
        ...(loops ? { loops } : {}),
      } as never);
    },
  );

  app.get(
    '/metrics',
    { schema: { tags: ['operations'], summary: 'Prometheus metrics' } },
    async (_request, reply) => reply.type(deps.metrics.contentType).send(await deps.metrics.metrics()),
  );
}
