import { type Keyring, parseKeyring } from './core/identity/secretBox.ts';

/** Settings, compiled once at the edge; the rest of the server sees only these values. */
export interface ServerConfig {
  databaseUrl: string;
  host: string;
  port: number;
  publicUrl: string;
  adminToken: string;
  secretKeyring: Keyring;
  allowInsecureCallbacks: boolean;
  natsUrl: string | null;
  /** First token of event subjects (`tdp.<tenant>.<application>.events.<type>`). */
  natsSubjectPrefix: string;
  bodyLimitBytes: number;
  requestDeadlineMs: number;
  statementTimeoutMs: number;
  databasePoolSize: number;
  logLevel: string;
  runLoops: boolean;
  /** Lifetime of execution tokens and handles (they are also revoked when their step attempt ends). */
  executionCredentialTtlMs: number;
  heartbeatIntervalSeconds: number;
  heartbeatTimeoutSeconds: number;
  /** The health reconciler judges nobody for this long after start-up or a database outage. */
  healthGraceMs: number;
  /** A worker whose heartbeats stop for this long is not given new work. */
  workerHeartbeatTtlMs: number;
  /** The in-process gateway keeps its channels in Redis (several nodes serve them); null: in memory. */
  redisUrl: string | null;
  /** Enables the gateway's server API (`/api/<method>`, `X-API-Key`). */
  gatewayApiKey: string | null;
  /** Realtime tokens signed with RS256/ES256 by these keys are accepted too. */
  realtimeJwksUrl: string | null;
  /** Publish through this Centrifugo-compatible server API instead of the in-process gateway. */
  centrifugoApiUrl: string | null;
  centrifugoApiKey: string | null;
  /** The WebSocket URL handed out with connection tokens (default: this server's). */
  realtimeWsUrl: string | null;
}

export class ConfigError extends Error {}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name]?.trim();
  if (!value) throw new ConfigError(`${name} is required`);
  return value;
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0)
    throw new ConfigError(`${name} must be a non-negative integer, got "${raw}"`);
  return value;
}

/** An optional setting: the override if given (null included), else the trimmed variable, else null. */
function optional<K extends keyof ServerConfig>(
  overrides: Partial<ServerConfig>,
  key: K,
  value: string | undefined,
): string | null {
  if (overrides[key] !== undefined) return overrides[key] as string | null;
  return value?.trim() || null;
}

const truthy = (value: string | undefined) => ['1', 'true', 'yes'].includes((value ?? '').toLowerCase());

/** Reads the server's settings from the environment (flags are folded into it by the CLI). */
export function configFromEnv(env: NodeJS.ProcessEnv, overrides: Partial<ServerConfig> = {}): ServerConfig {
  const port = overrides.port ?? integer(env, 'TDP_PORT', 8080);
  const host = overrides.host ?? env.TDP_HOST ?? '127.0.0.1';
  const adminToken = overrides.adminToken ?? required(env, 'TDP_ADMIN_TOKEN');
  if (adminToken.length < 16) throw new ConfigError('TDP_ADMIN_TOKEN must be at least 16 characters');
  let secretKeyring = overrides.secretKeyring;
  if (!secretKeyring) {
    try {
      secretKeyring = parseKeyring(required(env, 'TDP_SECRET_KEYS'));
    } catch (error) {
      throw new ConfigError(`TDP_SECRET_KEYS: ${(error as Error).message}`);
    }
  }
  const centrifugoApiUrl = optional(overrides, 'centrifugoApiUrl', env.CENTRIFUGO_API_URL);
  const centrifugoApiKey = optional(overrides, 'centrifugoApiKey', env.CENTRIFUGO_API_KEY);
  if (centrifugoApiUrl && !centrifugoApiKey)
    throw new ConfigError('CENTRIFUGO_API_KEY is required with CENTRIFUGO_API_URL');
  return {
    databaseUrl: overrides.databaseUrl ?? required(env, 'DATABASE_URL'),
    host,
    port,
    publicUrl:
      overrides.publicUrl ??
      env.TDP_PUBLIC_URL ??
      `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`,
    adminToken,
    secretKeyring,
    allowInsecureCallbacks: overrides.allowInsecureCallbacks ?? truthy(env.TDP_ALLOW_INSECURE_CALLBACKS),
    natsUrl: overrides.natsUrl !== undefined ? overrides.natsUrl : env.NATS_URL?.trim() || null,
    natsSubjectPrefix: overrides.natsSubjectPrefix ?? env.TDP_NATS_SUBJECT_PREFIX ?? 'tdp',
    bodyLimitBytes: overrides.bodyLimitBytes ?? integer(env, 'TDP_BODY_LIMIT_BYTES', 1024 * 1024),
    requestDeadlineMs: overrides.requestDeadlineMs ?? integer(env, 'TDP_REQUEST_DEADLINE_MS', 15_000),
    statementTimeoutMs: overrides.statementTimeoutMs ?? integer(env, 'TDP_STATEMENT_TIMEOUT_MS', 10_000),
    databasePoolSize: overrides.databasePoolSize ?? integer(env, 'TDP_DB_POOL_SIZE', 20),
    logLevel: overrides.logLevel ?? env.TDP_LOG_LEVEL ?? 'info',
    runLoops: overrides.runLoops ?? env.TDP_RUN_LOOPS !== 'false',
    executionCredentialTtlMs:
      overrides.executionCredentialTtlMs ?? integer(env, 'TDP_EXECUTION_CREDENTIAL_TTL_MS', 6 * 3600_000),
    heartbeatIntervalSeconds:
      overrides.heartbeatIntervalSeconds ?? integer(env, 'TDP_HEARTBEAT_INTERVAL_SECONDS', 15),
    heartbeatTimeoutSeconds:
      overrides.heartbeatTimeoutSeconds ?? integer(env, 'TDP_HEARTBEAT_TIMEOUT_SECONDS', 60),
    healthGraceMs: overrides.healthGraceMs ?? integer(env, 'TDP_HEALTH_GRACE_MS', 120_000),
    workerHeartbeatTtlMs:
      overrides.workerHeartbeatTtlMs ?? integer(env, 'TDP_WORKER_HEARTBEAT_TTL_MS', 30_000),
    redisUrl: optional(overrides, 'redisUrl', env.REDIS_URL),
    gatewayApiKey: optional(overrides, 'gatewayApiKey', env.TDP_GATEWAY_API_KEY),
    realtimeJwksUrl: optional(overrides, 'realtimeJwksUrl', env.TDP_REALTIME_JWKS_URL),
    centrifugoApiUrl,
    centrifugoApiKey,
    realtimeWsUrl: optional(overrides, 'realtimeWsUrl', env.TDP_REALTIME_WS_URL),
  };
}
