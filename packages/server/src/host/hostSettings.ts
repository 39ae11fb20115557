/** The host's settings: the database, the HTTP listener, the keys every feature shares, the loops' net. */
import { egressPolicy, splitAllowList } from '@tdp/egress/policy';
import { defaultJsonMaxDepth, jsonMaxDepthCeiling } from '@tdp/protocol';
import { Type } from 'typebox';
import type { TrustProxy } from '../adapters/inbound/http/app.ts';
import { type Keyring, parseKeyring } from '../core/identity/secretBox.ts';
import { defaultLoopRetry, type LoopRetry } from './loops/wakeableLoop.ts';
import { ConfigError, setting, settingsSlice } from './settings.ts';
import { parseTrustProxy } from './trustProxy.ts';

const tracingVariables = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'];

export const hostSettings = settingsSlice(
  Type.Object({
    databaseUrl: setting.requiredString({
      env: 'DATABASE_URL',
      description: 'The PostgreSQL database (`postgres://…`); `tdp dev` starts an embedded one.',
    }),
    databasePoolSize: setting.integer({
      env: 'TDP_DB_POOL_SIZE',
      default: 20,
      description: 'Connections of the main pool.',
    }),
    heartbeatPoolSize: setting.integer({
      env: 'TDP_DB_HEARTBEAT_POOL_SIZE',
      default: 4,
      description:
        'Connections of the heartbeat pool, apart from the main one: a burst of heartbeats never queues a fact transaction.',
    }),
    statementTimeoutMs: setting.integer({
      env: 'TDP_STATEMENT_TIMEOUT_MS',
      default: 10_000,
      description: 'PostgreSQL cancels a statement that runs longer (`statement_timeout`).',
    }),
    databaseAnswerDeadlineMs: setting.integer({
      env: 'TDP_DATABASE_ANSWER_DEADLINE_MS',
      default: 15_000,
      description:
        'A connection that owes an answer and has heard nothing for this long is destroyed, never handed back to the pool; it holds when the network stops passing bytes.',
    }),
    databaseIdleInTransactionTimeoutMs: setting.integer({
      env: 'TDP_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS',
      default: 60_000,
      description: 'PostgreSQL ends a session idle inside a transaction for this long.',
    }),
    shutdownDatabaseTimeoutSeconds: setting.value({
      default: 5,
      description: 'On shutdown, database connections get this long to finish their queries.',
    }),
    host: setting.string({
      env: 'TDP_HOST',
      default: '127.0.0.1',
      description: 'The address the API listens on.',
    }),
    port: setting.integer({ env: 'TDP_PORT', default: 8080, description: 'The port the API listens on.' }),
    trustProxy: setting.custom<TrustProxy>({
      variables: ['TDP_TRUST_PROXY'],
      typeName: 'addresses, CIDRs or a hop count',
      default: false,
      defaultText: 'none',
      description:
        'The proxies whose `X-Forwarded-For`, `-Proto` and `-Host` count (comma-separated addresses, CIDRs, `loopback`, `linklocal`, `uniquelocal`; or a number of hops): a request they say came over TLS gets `Secure` cookies, and `request.ip` is the client behind them.',
      parse: (env) => parseTrustProxy(env.TDP_TRUST_PROXY),
    }),
    publicUrl: setting.custom<string>({
      variables: ['TDP_PUBLIC_URL'],
      typeName: 'URL',
      defaultText: '`http://<host>:<port>`',
      description: 'The URL clients reach this server at (in the OpenAPI document and links).',
      parse: (env) => env.TDP_PUBLIC_URL?.trim() || undefined,
    }),
    adminToken: setting.requiredString({
      env: 'TDP_ADMIN_TOKEN',
      description:
        'The bootstrap admin token (at least 16 characters): a platform-wide admin for the admin API and the dashboard, to create the first operator accounts ([operators](operators.md)).',
    }),
    adminTokenEnabled: setting.flag({
      env: 'TDP_ADMIN_TOKEN_ENABLED',
      default: true,
      form: 'unless-false',
      description:
        '`false` switches the bootstrap admin token off once operators have accounts: it then opens nothing, the sessions it opened included.',
    }),
    secretKeyring: setting.custom<Keyring>({
      variables: ['TDP_SECRET_KEYS'],
      typeName: '`keyId:base64key,…`',
      defaultText: 'required',
      description:
        'The keys that seal stored secrets and sign tokens; the first is active, the others still open what they sealed.',
      parse: (env) => {
        const raw = env.TDP_SECRET_KEYS?.trim();
        if (!raw) throw new ConfigError('TDP_SECRET_KEYS is required');
        try {
          return parseKeyring(raw);
        } catch (error) {
          throw new ConfigError(`TDP_SECRET_KEYS: ${(error as Error).message}`);
        }
      },
    }),
    allowInsecureCallbacks: setting.flag({
      env: 'TDP_ALLOW_INSECURE_CALLBACKS',
      form: 'truthy',
      default: false,
      description:
        'Accepts plain-http and loopback URLs for callbacks and resource providers (development only).',
    }),
    egressAllow: setting.custom<string[]>({
      variables: ['TDP_EGRESS_ALLOW'],
      typeName: 'CIDRs and `host:port` pairs, comma-separated',
      default: [],
      defaultText: 'none (`tdp dev`: `127.0.0.0/8,::1/128`)',
      description:
        'What requests made on a tenant’s behalf (callbacks, notification webhooks, resource-provider calls) may reach beyond public addresses; loopback, private, link-local and other special addresses are refused unless named here (docs/security.md).',
      parse: (env) => (env.TDP_EGRESS_ALLOW?.trim() ? splitAllowList(env.TDP_EGRESS_ALLOW) : undefined),
    }),
    bodyLimitBytes: setting.integer({
      env: 'TDP_BODY_LIMIT_BYTES',
      default: 1024 * 1024,
      description: 'The largest request body the API reads.',
    }),
    jsonMaxDepth: setting.integer({
      env: 'TDP_JSON_MAX_DEPTH',
      default: defaultJsonMaxDepth,
      description:
        'JSON nested deeper (objects and arrays) is refused with 400 `JSON_TOO_DEEP`: request bodies, gRPC reports and realtime client commands (1 to 1000).',
    }),
    requestDeadlineMs: setting.integer({
      env: 'TDP_REQUEST_DEADLINE_MS',
      default: 15_000,
      description: 'A request still unanswered after this long gets a 503 `REQUEST_TIMEOUT`.',
    }),
    headersTimeoutMs: setting.integer({
      env: 'TDP_HEADERS_TIMEOUT_MS',
      default: 10_000,
      description:
        "A connection that has not sent a request's headers within this long is closed (408): a slow client holds no socket for long.",
    }),
    requestReadTimeoutMs: setting.integer({
      env: 'TDP_REQUEST_READ_TIMEOUT_MS',
      default: 30_000,
      description:
        'A connection that has not sent a whole request (headers and body) within this long is closed (408).',
    }),
    keepAliveTimeoutMs: setting.integer({
      env: 'TDP_KEEP_ALIVE_TIMEOUT_MS',
      default: 5_000,
      description: 'An idle keep-alive connection between requests is closed after this long.',
    }),
    maxConnectionsPerIp: setting.integer({
      env: 'TDP_MAX_CONNECTIONS_PER_IP',
      default: 1_024,
      description:
        'Open TCP connections one client address may hold to the API (and the embedded realtime gateway); one more is answered 429 `CONNECTION_LIMIT` and closed (`0`: no limit). Behind a proxy every client has its address.',
    }),
    notifyIntervalMs: setting.value({
      default: 100,
      description:
        'NOTIFYs that tell other replicas of new committed rows (outbox, realtime) are sent at most this often.',
    }),
    sseKeepAliveMs: setting.value({
      default: 15_000,
      description: 'An idle server-sent-event stream gets a comment this often, so proxies keep it open.',
    }),
    logLevel: setting.string({ env: 'TDP_LOG_LEVEL', default: 'info', description: 'The log level (pino).' }),
    tracing: setting.custom<boolean>({
      variables: tracingVariables,
      typeName: 'URL',
      default: false,
      description:
        'Spans through OpenTelemetry (docs/observability.md): on when either OTLP endpoint is set.',
      parse: (env) => (tracingVariables.some((name) => env[name]?.trim()) ? true : undefined),
    }),
    runLoops: setting.flag({
      env: 'TDP_RUN_LOOPS',
      form: 'unless-false',
      default: true,
      description: '`false`: this replica serves the API only and leaves the background loops to the others.',
    }),
    loopRetry: setting.value<LoopRetry>({
      default: defaultLoopRetry,
      description: 'A failed loop round is retried after `firstMs`, doubling up to `maxMs`.',
    }),
    loopRoundDeadlineMs: setting.integer({
      env: 'TDP_LOOP_ROUND_DEADLINE_MS',
      // A callbacks round may wait out a few slow receivers (callbackTimeoutMs each); stuck is far beyond.
      default: 120_000,
      description:
        'A background loop busy with one round for longer than this is stuck: `/readyz` fails, naming it.',
    }),
    readinessDatabaseDeadlineMs: setting.integer({
      env: 'TDP_READINESS_DATABASE_DEADLINE_MS',
      default: 2_000,
      description: '`/readyz` fails when the pool cannot hand out a connection and answer within this long.',
    }),
    processFaultUnreadyMs: setting.integer({
      env: 'TDP_PROCESS_FAULT_UNREADY_MS',
      default: 30_000,
      description: 'After an unhandled rejection or uncaught exception, `/readyz` fails for this long.',
    }),
    shutdownDeadlineMs: setting.integer({
      env: 'TDP_SHUTDOWN_DEADLINE_MS',
      default: 30_000,
      description:
        'A shutdown (SIGTERM) still unfinished after this long is abandoned: the process exits with 1.',
    }),
  }),
  (settings) => {
    try {
      egressPolicy(settings.egressAllow);
    } catch (error) {
      throw new ConfigError(`TDP_EGRESS_ALLOW: ${(error as Error).message}`);
    }
    if (settings.adminToken.length < 16)
      throw new ConfigError('TDP_ADMIN_TOKEN must be at least 16 characters');
    if (settings.jsonMaxDepth < 1 || settings.jsonMaxDepth > jsonMaxDepthCeiling)
      throw new ConfigError(`TDP_JSON_MAX_DEPTH must be between 1 and ${jsonMaxDepthCeiling}`);
    settings.publicUrl ??= `http://${settings.host === '0.0.0.0' ? '127.0.0.1' : settings.host}:${settings.port}`;
  },
);
