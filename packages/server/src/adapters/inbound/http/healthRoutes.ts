import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { Type } from 'typebox';
import { problem, sendProblem } from './problems.ts';
import { ProblemSchema } from './schemas.ts';

export type ReadinessCheck = () => Promise<{
  ready: boolean;
  checks: Record<string, 'ok' | string>;
  loops?: unknown[];
}>;

const Checks = Type.Record(Type.String(), Type.String(), {
  description: "Each check: 'ok', or what is wrong",
});

/** Ready: every check says ok. */
const Ready = Type.Object({ status: Type.Literal('ready'), checks: Checks });

/** Not ready: a NOT_READY problem naming what fails, with every check and each loop's progress. */
const NotReady = {
  description: 'Not ready (NOT_READY)',
  content: {
    'application/problem+json': {
      schema: Type.Object({
        ...ProblemSchema.properties,
        checks: Checks,
        loops: Type.Optional(Type.Array(Type.Unknown())),
      }),
    },
  },
};

/** The NOT_READY problem for a failing readiness report: each failing check named in `detail`. */
export function notReady(
  report: Awaited<ReturnType<ReadinessCheck>>,
  instance: string,
): ReturnType<typeof problem> & { checks: Record<string, string>; loops?: unknown[] } {
  const failing = Object.entries(report.checks)
    .filter(([, value]) => value !== 'ok')
    .map(([name, value]) => `${name}: ${value}`)
    .join('; ');
  return {
    ...problem('NOT_READY', failing, undefined, instance),
    checks: report.checks,
    ...(report.loops ? { loops: report.loops } : {}),
  };
}

export function registerHealthRoutes(
  app: FastifyInstance,
  deps: { readiness: ReadinessCheck; metrics: Registry },
): void {
  // Liveness: the process answers HTTP. Database faults and stuck loops show in /readyz; a restart cures
  // neither (every database wait has a deadline, and restarting every replica in an outage helps nobody).
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
        summary:
          'Ready for work: the pool hands out a connection that answers, migrations are current, no loop is stuck',
        response: { 200: Ready, 503: NotReady },
      },
    },
    async (request, reply) => {
      const report = await deps.readiness();
      if (report.ready) return reply.send({ status: 'ready', checks: report.checks });
      return sendProblem(reply, notReady(report, request.url) as never);
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
