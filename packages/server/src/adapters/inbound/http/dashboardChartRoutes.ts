/** `GET /dashboard/api/charts?range=hour|day`: the pipeline page's series (docs/dashboard.md). */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  type ChartRange,
  type ChartReads,
  chartRanges,
  chartSeries,
} from '../../../core/operations/charts.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';

export function registerDashboardChartRoutes(
  app: FastifyInstance,
  deps: { charts: ChartReads; clock: Clock },
  /** The operator session check of the dashboard's other routes. */
  onRequest: (request: FastifyRequest) => Promise<void>,
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
      return chartSeries(deps, range as ChartRange);
    },
  );
}
