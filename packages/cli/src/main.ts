/**
 * `tdp` — one command for the platform.
 *
 *   tdp dev       embedded PostgreSQL + migrations + server, with a development tenant, application and key
 *   tdp server    the server against DATABASE_URL
 *   tdp migrate   apply database migrations to DATABASE_URL
 *   tdp worker    the worker runtime with the built-in capabilities (archive.clean)
 *   tdp gateway   the realtime gateway on its own (Centrifugo-compatible), for the server to publish to
 *   tdp centrifugo-config   the Centrifugo v6 config TDP needs, to run Centrifugo instead of the gateway
 *   tdp archive restore --task <id>   one archived task's history back from TDP_ARCHIVE_DIR
 *   tdp backup / tdp restore   base backup; point-in-time restore into a new cluster (backup.ts, restoreCluster.ts)
 *   tdp operators …   operators, their roles and personal tokens, through the admin API of TDP_URL
 */
import { parseArgs } from 'node:util';
import {
  AppError,
  ConfigError,
  centrifugoConfig,
  configFromEnv,
  connectDatabase,
  defaultSettings,
  guardProcess,
  migrate,
  restoreArchivedTask,
  startGatewayServer,
  startServer,
} from '@tdp/server';
import { ServerProblem, ServerUnreachable } from './adminClient.ts';
import { Refusal, runBackup } from './backup.ts';
import { runDev } from './dev.ts';
import type { WorkerProcessMessage } from './devWorker.ts';
import { runOperators } from './operators.ts';
import { runRestore } from './restoreCluster.ts';
import { onShutdownSignal } from './signals.ts';
import { startTracing } from './tracing.ts';
import { reportUnknownVariables } from './variables.ts';

const usage = `Usage: tdp <command> [options]

Commands:
  dev        Run TDP locally: embedded PostgreSQL, migrations, server; prints URLs and a development API key
  server     Run the server against DATABASE_URL (requires TDP_ADMIN_TOKEN and TDP_SECRET_KEYS)
  migrate    Apply database migrations to DATABASE_URL
  worker     Run a worker against TDP_URL with TDP_WORKER_KEY (local state in TDP_WORKER_DB)
  gateway    Run the realtime gateway alone on TDP_GATEWAY_PORT (default 8000), with TDP_SECRET_KEYS and
             TDP_GATEWAY_API_KEY; REDIS_URL lets several gateways serve the same channels;
             --config <file> reads a Centrifugo v6 JSON config (packages/gateway/README.md)
  centrifugo-config
             Print the Centrifugo v6 JSON config TDP needs (docs/realtime.md, "Moving to Centrifugo"), from
             TDP_REALTIME_TOKEN_SECRET, CENTRIFUGO_API_KEY, and optionally CENTRIFUGO_ALLOWED_ORIGINS
             (comma-separated; TDP_PUBLIC_URL's origin, where the dashboard is, joins them) and
             CENTRIFUGO_REDIS_URL (several Centrifugo nodes on one Redis)
  archive restore --task <id>
             Put an archived task's history back into DATABASE_URL from TDP_ARCHIVE_DIR (docs/retention.md)
  backup --to <folder> [--archive <wal archive>]
             A base backup of DATABASE_URL's cluster (pg_basebackup); the server must archive its WAL
  restore --backup <base> --to <time|latest> --pgdata <new folder> [--archive <wal archive>] [--port <n>]
             A new cluster recovered to that time from the backup and the WAL archive, then checked
             (docs/operations.md, "Backups and point-in-time restore"; tdp backup|restore --help)
  operators  List, create, disable and enable operators, set their roles, sign them out, and manage
             personal API tokens, through the admin API of TDP_URL with TDP_OPERATOR_TOKEN or
             TDP_ADMIN_TOKEN (tdp operators --help; docs/operators.md)

Options:
  --port <n>           HTTP port (TDP_PORT, default 8080; 0 picks a free port)
  --home <dir>         Data folder for 'dev' (TDP_HOME, default ./.tdp)
  --host <addr>        Listen address (TDP_HOST, default 127.0.0.1)
  --server <urls>      For 'worker': the TDP server, or its replicas separated by commas (TDP_URL);
                       the worker moves its session to the next when the one it uses stops answering
  --config <file>      For 'gateway': a Centrifugo v6 JSON config (token key, API key, client.insecure,
                       allow_anonymous_connect_without_token, channel namespaces); unknown keys fail
  --concurrency <n>    For 'worker': attempts run at once (TDP_WORKER_CONCURRENCY, default 10)
  -h, --help           Show this help
`;

async function main(argv: string[]): Promise<number> {
  // Its own options (--email, --role, …) and help: a client of a running server, not a process of TDP.
  if (argv[0] === 'operators') return runOperators(argv.slice(1), process.env);
  if (argv[0] === 'backup') return runBackup(argv.slice(1), process.env);
  if (argv[0] === 'restore') return runRestore(argv.slice(1), process.env);
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      port: { type: 'string' },
      home: { type: 'string' },
      host: { type: 'string' },
      server: { type: 'string' },
      concurrency: { type: 'string' },
      task: { type: 'string' },
      config: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const command = positionals[0];
  if (values.help || !command) {
    process.stdout.write(usage);
    return command || values.help ? 0 : 2;
  }
  const env = { ...process.env };
  if (values.port !== undefined) env.TDP_PORT = values.port;
  if (values.home !== undefined) env.TDP_HOME = values.home;
  if (values.host !== undefined) env.TDP_HOST = values.host;
  if (values.server !== undefined) env.TDP_URL = values.server;
  if (values.concurrency !== undefined) env.TDP_WORKER_CONCURRENCY = values.concurrency;

  switch (command) {
    case 'dev':
      return runDev(env);
    case 'server': {
      const config = configFromEnv(env);
      const tracing = await startTracing(env, 'tdp-server');
      const server = await startServer(config);
      // A net for faults nothing handled: logged, and /readyz fails for a while (see processGuard.ts).
      guardProcess({ logger: server.logger, onFault: (kind) => server.health.processFault(kind) });
      server.logger.info({ url: server.url }, 'TDP server listening');
      reportUnknownVariables(env, server.logger);
      await onShutdownSignal(async () => {
        await server.close();
        await tracing?.shutdown();
      }, config.shutdownDeadlineMs);
      return 0;
    }
    case 'migrate': {
      const url = env.DATABASE_URL;
      if (!url) throw new ConfigError('DATABASE_URL is required');
      const sql = connectDatabase({ url, maxConnections: 1 });
      try {
        const applied = await migrate(sql);
        process.stdout.write(
          applied.length ? `applied: ${applied.join(', ')}\n` : 'migrations are current\n',
        );
      } finally {
        await sql.end();
      }
      return 0;
    }
    case 'worker': {
      const [{ startWorkerFromEnv }, { builtinCapabilityModule }] = await Promise.all([
        import('@tdp/worker/main'),
        import('@tdp/capabilities'),
      ]);
      const tracing = await startTracing(env, 'tdp-worker');
      const started = startWorkerFromEnv(env, builtinCapabilityModule);
      // SIGTERM drains: nothing new is taken, running attempts finish or are handed back. The handler
      // goes in before the worker registers: a SIGTERM as soon as the server sees it READY (a supervisor
      // stopping it at once) drains it once started, instead of killing it mid-start.
      const signalled = onShutdownSignal(async () => (await started).drain());
      // Started by `tdp dev` (an IPC channel): it hears how the start went, and its going away drains us.
      const parent = process.send?.bind(process);
      const worker = await started.catch((error: Error) => {
        parent?.({
          type: 'tdp-worker-failed',
          name: error.name,
          message: error.message,
        } satisfies WorkerProcessMessage);
        throw error;
      });
      if (parent) {
        parent({ type: 'tdp-worker-ready', workerId: worker.id } satisfies WorkerProcessMessage);
        process.once('disconnect', () => void worker.drain().then(() => process.exit(0)));
      }
      await Promise.race([signalled, worker.runtime.done]);
      await tracing?.shutdown();
      return 0;
    }
    case 'gateway': {
      const gateway = await startGatewayServer(env, values.config ? { configPath: values.config } : {});
      guardProcess({});
      process.stdout.write(
        `TDP gateway listening on ${gateway.url} (WebSocket ${gateway.url.replace('http', 'ws')}/connection/websocket, API ${gateway.url}/api)\n`,
      );
      await onShutdownSignal(() => gateway.close(), defaultSettings.shutdownDeadlineMs);
      return 0;
    }
    case 'centrifugo-config': {
      const origins = env.CENTRIFUGO_ALLOWED_ORIGINS?.split(',').map((origin) => origin.trim()) ?? [];
      // The dashboard is served by TDP itself: its pages connect from TDP's public origin.
      const dashboard = env.TDP_PUBLIC_URL ? URL.parse(env.TDP_PUBLIC_URL)?.origin : undefined;
      if (dashboard && dashboard !== 'null' && !origins.includes(dashboard)) origins.push(dashboard);
      const redisUrl = env.CENTRIFUGO_REDIS_URL?.trim();
      const config = centrifugoConfig({
        tokenSecret: env.TDP_REALTIME_TOKEN_SECRET ?? '',
        apiKey: env.CENTRIFUGO_API_KEY ?? '',
        realtimeHistory: defaultSettings.realtimeHistory,
        allowedOrigins: origins.filter(Boolean),
        redis: redisUrl ? { url: redisUrl, prefix: 'centrifugo' } : null,
      });
      process.stdout.write(`${JSON.stringify(config, null, 2)}\n`);
      return 0;
    }
    case 'archive': {
      if (positionals[1] !== 'restore' || !values.task) {
        process.stderr.write(`usage: tdp archive restore --task <id>\n`);
        return 2;
      }
      const databaseUrl = env.DATABASE_URL;
      const archiveDirectory = env.TDP_ARCHIVE_DIR;
      if (!databaseUrl || !archiveDirectory)
        throw new ConfigError('DATABASE_URL and TDP_ARCHIVE_DIR are required');
      const report = await restoreArchivedTask({ databaseUrl, archiveDirectory }, values.task);
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      return 0;
    }
    default:
      process.stderr.write(`unknown command "${command}"\n\n${usage}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    // A refusal did nothing: its code and what to do instead, exit code 2 (as for bad usage).
    if (error instanceof Refusal) {
      process.stderr.write(`tdp: ${error.message}\n`);
      process.exit(2);
    }
    // Errors we raise on purpose read as messages; anything else keeps its stack for the bug report.
    const expected =
      error instanceof ConfigError ||
      error instanceof AppError ||
      error instanceof ServerProblem ||
      error instanceof ServerUnreachable ||
      (error as Error)?.name === 'WorkerConfigError';
    process.stderr.write(
      `tdp: ${expected ? (error as Error).message : ((error as Error).stack ?? String(error))}\n`,
    );
    process.exit(1);
  },
);
