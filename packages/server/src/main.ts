/**
 * The composition root: the only place that knows every concrete class. It turns a config into a
 * running server (HTTP API + background loops) and gives back a handle that shuts it all down in order:
 * config → adapters (composition/adapters.ts) → use-case dependencies (composition/useCases.ts) → gRPC
 * reporting (composition/grpc.ts) → HTTP API (composition/api.ts) → loops (composition/loops.ts) → listen.
 */
import type { Gateway } from '@tdp/gateway';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Sql } from './adapters/outbound/postgres/database.ts';
import { connectAdapters, type ServerDependencies } from './composition/adapters.ts';
import { createApi } from './composition/api.ts';
import { startReportingGrpc } from './composition/grpc.ts';
import { createLoops, type RunningLoops } from './composition/loops.ts';
import { startTemporal } from './composition/temporal.ts';
import { useCaseDeps } from './composition/useCases.ts';
import type { ServerConfig } from './config.ts';
import type { ApplicationDeps } from './core/identity/applications.ts';
import type { DispatchDeps } from './core/scheduling/dispatch.ts';
import type { StatusDeps } from './core/status/deps.ts';
import { developmentProviderPath } from './development/developmentFiles.ts';
import { realtimeTokenSecretFrom } from './realtimeGateway.ts';
import { listenForCommands } from './wiring/commandWakeup.ts';
import { FollowerWakeup, projectionFollowLoop, realtimeCommittedChannel } from './wiring/realtimeDelivery.ts';
import type { ServerHealth } from './wiring/serverHealth.ts';

export { connectDatabase } from './adapters/outbound/postgres/database.ts';
export { migrate } from './adapters/outbound/postgres/migrate.ts';
export { type CentrifugoSettings, centrifugoConfig, tdpChannelNamespaces } from './centrifugoConfig.ts';
export type { ServerDependencies } from './composition/adapters.ts';
export { serverVersion } from './composition/api.ts';
export {
  ConfigError,
  configFromEnv,
  defaultSettings,
  type ServerConfig,
  type ServerSettings,
} from './config.ts';
export { restoreArchivedTask } from './wiring/retention.ts';

export interface RunningServer {
  app: FastifyInstance;
  sql: Sql;
  url: string;
  identity: ApplicationDeps;
  /** The status service's dependencies (tests drive the health reconciler with them). */
  status: StatusDeps;
  /** The scheduler round's dependencies (tests run a round with them when the loops are off). */
  dispatch: DispatchDeps;
  logger: Logger;
  /** The realtime gateway serving this process's WebSocket, SSE and server API endpoints. */
  gateway: Gateway;
  /** What /readyz answers; the process guard reports the faults it caught to it. */
  health: ServerHealth;
  /** The gRPC reporting port (docs/grpc.md); null when `grpcPort` turns it off. */
  grpcPort: number | null;
  /** The development resource provider this process serves (`developmentFiles`), or null. */
  developmentProvider: { url: string; token: string } | null;
  /** Stops accepting, lets in-flight requests and loop rounds finish, then closes connections. */
  close(): Promise<void>;
}

export async function startServer(
  config: ServerConfig,
  overrides: ServerDependencies = {},
): Promise<RunningServer> {
  // A realtime token secret too short to sign with stops the start before anything is connected.
  realtimeTokenSecretFrom(config.realtimeTokenSecret);
  const adapters = await connectAdapters(config, overrides);
  const { sql, clock, signal, gateway, nats } = adapters;
  const uses = useCaseDeps(config, adapters);
  const grpc = await startReportingGrpc(config, adapters, uses);
  // Started after the loops (below); the health page asks it whether it is connected.
  let temporal: ReturnType<typeof startTemporal> = null;
  const app = await createApi(config, adapters, uses, { grpcPort: grpc?.port ?? null }, () =>
    temporal ? temporal.connected() : null,
  );
  // Streams held here hear at once of commands another replica wrote for their workers.
  const unlistenCommands = await listenForCommands(sql, uses.hub);
  // With Centrifugo, this replica's task streams are fed from what every replica committed.
  const follower = await projectionFollowLoop(config, { sql, gateway, clock, logger: adapters.logger });
  signal.follower = follower
    ? new FollowerWakeup(
        follower,
        () => sql.notify(realtimeCommittedChannel, ''),
        config.outboxNotifyIntervalMs,
      )
    : null;
  const unlistenFollower = follower
    ? (await sql.listen(realtimeCommittedChannel, () => follower.wake())).unlisten
    : async () => {};
  const running: RunningLoops = config.runLoops
    ? await createLoops(config, adapters, uses)
    : { loops: [], unlisten: async () => {} };
  adapters.health.loops = [...running.loops, ...(follower ? [follower] : [])];
  temporal = startTemporal(config, adapters, uses);

  await app.listen({ host: config.host, port: config.port });
  for (const loop of running.loops) loop.start();
  follower?.start();
  // Loops that sleep until a row's due time re-plan after a jump. (The scheduler and the lease reaper
  // run every second or two anyway; waking them at the jump would judge workers before they beat.)
  clock.onJump?.(() => {
    for (const loop of [
      signal.loops.timers,
      signal.loops.callbacks,
      signal.loops.outbox,
      signal.loops.realtime,
      signal.loops.schedules,
    ])
      loop?.wake();
  });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${port}`;

  let closing: Promise<void> | null = null;
  return {
    app,
    sql,
    url,
    identity: uses.identity,
    status: uses.status,
    dispatch: uses.dispatch,
    logger: adapters.logger,
    gateway,
    health: adapters.health,
    grpcPort: grpc?.port ?? null,
    developmentProvider: config.developmentFiles
      ? { url: `${url}${developmentProviderPath}`, token: config.developmentFiles.providerToken }
      : null,
    close: () => {
      closing ??= (async () => {
        await gateway.close();
        await Promise.all([app.close(), grpc?.close(config.grpcCloseGraceMs)]);
        await Promise.all([...running.loops, ...(follower ? [follower] : [])].map((loop) => loop.stop()));
        await temporal?.stop().catch(() => {});
        await signal.handoff?.idle();
        await signal.capacity?.stop();
        await running.unlisten().catch(() => {});
        await unlistenCommands().catch(() => {});
        await unlistenFollower().catch(() => {});
        await nats?.close().catch(() => {});
        await Promise.all([
          sql.end({ timeout: config.shutdownDatabaseTimeoutSeconds }),
          adapters.heartbeatSql.end({ timeout: config.shutdownDatabaseTimeoutSeconds }),
        ]);
      })();
      return closing;
    },
  };
}
export { ensureDevelopmentIdentity } from './core/identity/developmentIdentity.ts';
export { generateKeyringEntry, parseKeyring } from './core/identity/secretBox.ts';
export { AppError } from './core/shared/errors.ts';
export { useDevelopmentProvider } from './development/developmentFiles.ts';
export { realtimeTokenKey, realtimeTokenSecretFrom, startGatewayServer } from './realtimeGateway.ts';
export { guardProcess } from './wiring/processGuard.ts';
