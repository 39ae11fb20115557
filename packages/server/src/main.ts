/**
 * The server: the host and the list of its features, started in this order (a feature may use what an
 * earlier one provides) and stopped in reverse. A feature lives in `features/<name>/` with its settings,
 * routes, loops, after-commit subscriptions and stop; adding one is a folder and a line here.
 */
import type { Gateway } from '@tdp/gateway';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Sql } from './adapters/outbound/postgres/database.ts';
import type { ApplicationDeps } from './core/identity/applications.ts';
import type { StatusDeps } from './core/status/deps.ts';
import type { DispatchDeps } from './core/workers/dispatch.ts';
import { callbacksFeature } from './features/callbacks/feature.ts';
import { dashboardFeature } from './features/dashboard/feature.ts';
import { definitionsFeature } from './features/definitions/feature.ts';
import { developmentProviderPath } from './features/development/developmentFiles.ts';
import { developmentFeature } from './features/development/feature.ts';
import { eventsFeature } from './features/events/feature.ts';
import { grantsFeature } from './features/grants/feature.ts';
import { grpcFeature } from './features/grpc/feature.ts';
import { identityFeature } from './features/identity/feature.ts';
import { notificationsFeature } from './features/notifications/feature.ts';
import { operationsFeature } from './features/operations/feature.ts';
import { operatorsFeature } from './features/operators/feature.ts';
import { orchestrationFeature } from './features/orchestration/feature.ts';
import { realtimeFeature } from './features/realtime/feature.ts';
import { retentionFeature } from './features/retention/feature.ts';
import { schedulesFeature } from './features/schedules/feature.ts';
import { statusFeature } from './features/status/feature.ts';
import { tasksFeature } from './features/tasks/feature.ts';
import { temporalFeature } from './features/temporal/feature.ts';
import { workersFeature } from './features/workers/feature.ts';
import { awaitWritableDatabase } from './host/databaseGate.ts';
import type { SettingsOf } from './host/feature.ts';
import type { ServerHealth } from './host/health.ts';
import { createHost, type HostSettings, type ServerDependencies } from './host/host.ts';
import { hostSettings } from './host/hostSettings.ts';
import { runFeatures } from './host/run.ts';
import {
  checkConfiguration,
  configurationDoc,
  readConfiguration,
  type SettingsSlice,
  sliceDefaults,
  unknownVariables,
} from './host/settings.ts';

/** Every feature of the server, in start order. */
export const features = [
  identityFeature,
  operatorsFeature,
  definitionsFeature,
  statusFeature,
  workersFeature,
  grantsFeature,
  eventsFeature,
  temporalFeature,
  tasksFeature,
  orchestrationFeature,
  callbacksFeature,
  notificationsFeature,
  realtimeFeature,
  schedulesFeature,
  retentionFeature,
  operationsFeature,
  grpcFeature,
  developmentFeature,
  dashboardFeature,
] as const;

/** The server's configuration: the host's settings and every feature's. */
export type ServerConfig = HostSettings & SettingsOf<typeof features>;

/** The settings that have a default (all but the database, the admin token, the keys, the public URL). */
export type ServerSettings = Omit<ServerConfig, 'databaseUrl' | 'adminToken' | 'secretKeyring' | 'publicUrl'>;

/** The host's settings and each feature's, in the order docs/configuration.md lists them. */
const configured: { name: string; settings?: SettingsSlice }[] = [
  { name: 'host', settings: hostSettings },
  ...features,
];
const slices = configured.flatMap(({ settings }) => (settings ? [settings] : []));

/** Every setting's default, from the settings' schemas. */
export const defaultSettings = sliceDefaults(slices) as ServerSettings;

/** Reads the server's settings from the environment (the CLI folds its flags into it), under `overrides`. */
export function configFromEnv(env: NodeJS.ProcessEnv, overrides: Partial<ServerConfig> = {}): ServerConfig {
  return readConfiguration(slices, env, overrides) as ServerConfig;
}

/** The `TDP_*` variables in `env` that no setting reads (a misspelt name would be ignored in silence). */
export const unknownServerVariables = (env: NodeJS.ProcessEnv, alsoKnown: readonly string[] = []) =>
  unknownVariables(env, slices, alsoKnown);

/** docs/configuration.md, from the settings' schemas. */
export const configurationReference = () => configurationDoc(configured);

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
  dependencies: ServerDependencies = {},
): Promise<RunningServer> {
  // A configuration an embedder built is checked as one read from the environment, before anything connects.
  checkConfiguration(slices, config);
  const host = await createHost(config, dependencies);
  await awaitWritableDatabase(host);
  const running = await runFeatures(host, features, config);
  return {
    app: host.app,
    sql: host.sql,
    url: running.url,
    identity: host.need('identity').applications,
    status: host.need('status').deps,
    dispatch: host.need('workers').dispatch,
    logger: host.logger,
    gateway: host.need('realtime').gateway,
    health: host.health,
    grpcPort: host.need('grpc').port,
    developmentProvider: config.developmentFiles
      ? { url: `${running.url}${developmentProviderPath}`, token: config.developmentFiles.providerToken }
      : null,
    close: running.stop,
  };
}

export { connectDatabase } from './adapters/outbound/postgres/database.ts';
export { migrate } from './adapters/outbound/postgres/migrate.ts';
export { ensureDevelopmentIdentity } from './core/identity/developmentIdentity.ts';
export { generateKeyringEntry, parseKeyring } from './core/identity/secretBox.ts';
export { AppError } from './core/shared/errors.ts';
export { useDevelopmentProvider } from './features/development/developmentFiles.ts';
export {
  type CentrifugoSettings,
  centrifugoConfig,
  tdpChannelNamespaces,
} from './features/realtime/centrifugoConfig.ts';
export {
  realtimeTokenKey,
  realtimeTokenSecretFrom,
  startGatewayServer,
} from './features/realtime/gateway.ts';
export { restoreArchivedTask } from './features/retention/restore.ts';
export { type ServerDependencies, serverVersion } from './host/host.ts';
export { guardProcess } from './host/processGuard.ts';
export { ConfigError } from './host/settings.ts';
