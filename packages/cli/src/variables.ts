/**
 * The `TDP_*` variables the CLI and the programs it runs read besides the server's own settings (the
 * worker's, the demo's, `tdp dev`'s, `tdp operators`'). Any other `TDP_*` variable at a start is
 * reported: a misspelt setting would otherwise be ignored in silence.
 */
import { unknownServerVariables } from '@tdp/server';

const programVariables = [
  'TDP_HOME',
  'TDP_URL',
  'TDP_DEMO_PORT',
  'TDP_DEV_API_KEY',
  'TDP_PG_PORT',
  'TDP_GATEWAY_PORT',
  'TDP_GRPC_URL',
  'TDP_NODE_ID',
  // `tdp operators`' credential: an operator's personal token.
  'TDP_OPERATOR_TOKEN',
  'TDP_WORKER_CAPABILITY_CONCURRENCY',
  'TDP_WORKER_CONCURRENCY',
  'TDP_WORKER_DB',
  'TDP_WORKER_HEALTH_PORT',
  'TDP_WORKER_KEY',
  'TDP_WORKER_KEY_FILE',
  'TDP_WORKER_MAX_DOWNLOAD_BYTES',
  'TDP_WORKER_MEMORY_LIMIT_MB',
  'TDP_WORKER_NAME',
  'TDP_WORKER_TIME_LIMIT_MS',
  'TDP_WORKER_TRANSPORT',
];

/** Logs the `TDP_*` variables nothing reads, once, at a start. */
export function reportUnknownVariables(
  env: NodeJS.ProcessEnv,
  logger: { warn(details: object, message: string): void },
): string[] {
  const unknown = unknownServerVariables(env, programVariables);
  if (unknown.length > 0)
    logger.warn(
      { variables: unknown },
      `ignored ${unknown.join(', ')}: no setting reads ${unknown.length === 1 ? 'it' : 'them'} (docs/configuration.md lists every one)`,
    );
  return unknown;
}
