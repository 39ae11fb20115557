/** `GET /dashboard/api/charts?range=hour|day`: the pipeline page's series (docs/dashboard.md). */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  type ChartRange,
  type ChartReads,
  chartRanges,
  chartSeries,
} from '../../../core/operations/charts.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import { reachOf } from './operatorAuth.ts';

export function registerDashboardChartRoutes(
  app: FastifyInstance,
  deps: { charts: ChartReads; clock: Clock },
  /** The dashboard's gate for readers. */
  onRequest: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
): void {
  app.get<{ Querystring: { range?: string } }>(
    '/dashboard/api/charts',
    { schema: { hide: true }, onRequest },
    async (request) => {
      const range = request.query.range ?? 'hour';
      if (!Object.hasOwn(chartRanges, range))
        throw new AppError(
          'VALIDATION_FAILED',
          `range must be one of ${Object.keys(chartRanges).join(', ')}`,
        );
      // A tenant's reader gets their tenants' task counts, without the platform's gauges.
      return chartSeries(deps, range as ChartRange, reachOf(request));
    },
  );
}
