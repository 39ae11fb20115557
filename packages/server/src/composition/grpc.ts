/** The composition root, part 3b: the gRPC reporting adapter, over the same use cases as the REST routes. */
import { type RunningGrpc, startGrpcReporting } from '../adapters/inbound/grpc/server.ts';
import { rateLimitedUserTokens } from '../adapters/inbound/http/rateLimits.ts';
import { statusCallers } from '../adapters/inbound/http/statusRouteContext.ts';
import type { ServerConfig } from '../config.ts';
import type { Adapters } from './adapters.ts';
import type { UseCases } from './useCases.ts';

/** Starts it on `config.grpcPort` (0: a free port); null when the setting turns it off. */
export async function startReportingGrpc(
  config: ServerConfig,
  a: Adapters,
  uses: UseCases,
): Promise<RunningGrpc | null> {
  if (config.grpcPort === null) return null;
  const callers = statusCallers({
    authenticator: a.authenticator,
    status: uses.status,
    reads: { reads: a.statusReads, clock: a.clock, ids: a.ids },
    userTokens: rateLimitedUserTokens(a.userTokens, a.rateLimits),
    rateLimits: a.rateLimits,
  });
  return startGrpcReporting(
    {
      status: uses.status,
      callers,
      workers: uses.workers,
      rateLimits: a.rateLimits,
      logger: a.logger,
      streamWindow: config.grpcStreamWindow,
      streamMaxBindings: config.grpcStreamMaxBindings,
      streamRoundSize: config.grpcStreamRoundSize,
    },
    { host: config.host, port: config.grpcPort },
  );
}
