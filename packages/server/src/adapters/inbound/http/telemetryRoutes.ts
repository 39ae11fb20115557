/**
 * `POST /v1/telemetry/visibility` (docs/observability.md): a browser's client store reports sampled
 * commit→visible latencies (how long a committed change took to reach a person's screen) with its user
 * token; they feed a histogram and nothing is stored. Small bodies only, a token bucket per user.
 */
import type { FastifyInstance } from 'fastify';
import type { Histogram } from 'prom-client';
import { Type } from 'typebox';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import { type BucketPolicy, TokenBuckets } from '../../../core/shared/tokenBuckets.ts';
import type { UserTokens } from '../../../core/status/ports.ts';
import { problemResponses } from './schemas.ts';

/** A sample longer than this is a clock gone wrong, not a latency. */
const maxSampleSeconds = 3_600;

export interface TelemetryRouteDeps {
  userTokens: UserTokens;
  clock: Clock;
  commitToVisible: Histogram;
  maxSamples: number;
  rate: BucketPolicy;
}

export function registerTelemetryRoutes(app: FastifyInstance, deps: TelemetryRouteDeps): void {
  const buckets = new TokenBuckets(deps.clock, deps.rate);
  const Body = Type.Object(
    {
      /** Seconds from a state's commit (its `committedAt`) to the store showing it. */
      commitToVisibleSeconds: Type.Array(Type.Number({ minimum: 0, maximum: maxSampleSeconds }), {
        minItems: 1,
        maxItems: deps.maxSamples,
      }),
    },
    { additionalProperties: false },
  );
  app.post<{ Body: { commitToVisibleSeconds: number[] } }>(
    '/v1/telemetry/visibility',
    {
      bodyLimit: 4_096,
      schema: {
        tags: ['realtime'],
        summary: "Report sampled commit→visible latencies of a user's browser",
        security: [{ userToken: [] }],
        body: Body,
        response: { 204: Type.Null(), ...problemResponses },
      },
    },
    async (request, reply) => {
      const token = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '')?.[1];
      const user = token ? await deps.userTokens.verify(token, deps.clock.now()) : null;
      if (!user)
        throw new AppError('UNAUTHENTICATED', 'send a user token as "Authorization: Bearer <token>"');
      const taken = buckets.take(`${user.applicationId}\n${user.viewer.userId}`);
      if (!taken.allowed) {
        const seconds = Math.max(1, Math.ceil(taken.retryAfterMs / 1000));
        reply.header('retry-after', String(seconds));
        throw new AppError('RATE_LIMITED', `too many visibility reports; retry after ${seconds} s`);
      }
      for (const sample of request.body.commitToVisibleSeconds) deps.commitToVisible.observe(sample);
      return reply.code(204).send();
    },
  );
}
