import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { builtinCapabilities } from '@tdp/capabilities';
import { type DemoApp, ensureDemoApplication, registerDemoProvider, startDemoApp } from '@tdp/demo-app';
import { loopbackAllowList, splitAllowList } from '@tdp/egress/policy';
import {
  configFromEnv,
  connectDatabase,
  ensureDevelopmentIdentity,
  generateKeyringEntry,
  migrate,
  parseKeyring,
  startServer,
  useDevelopmentProvider,
} from '@tdp/server';
import {
  credentialsPath,
  type DevCredentials,
  loadCredentials,
  newAdminToken,
  saveCredentials,
} from './credentials.ts';
import { type DevOperator, ensureDevelopmentOperator } from './devOperator.ts';
import { type DevWorker, startDevWorker } from './devWorker.ts';
import { freePort, newPostgresPassword, startEmbeddedPostgres } from './embeddedPostgres.ts';
import { writeSamples } from './samples.ts';
import { onShutdownSignal } from './signals.ts';
import { reportUnknownVariables } from './variables.ts';

const preferredPostgresPort = 54329;
const preferredDemoPort = 8090;
/** What `/readyz` says until `tdp dev` has made its development key, samples and demo app. */
const developmentSetup = 'setting up the development key, sample ZIPs and demo app';

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const probe = createServer()
      .once('error', () => resolvePromise(false))
      .once('listening', () => probe.close(() => resolvePromise(true)))
      .listen(port, '127.0.0.1');
  });
}

async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const sql = connectDatabase({ url: adminUrl, maxConnections: 1 });
  try {
    const [exists] = await sql`SELECT 1 FROM pg_database WHERE datname = ${name}`;
    if (!exists) await sql.unsafe(`CREATE DATABASE "${name}"`);
  } finally {
    await sql.end();
  }
}

/** `tdp dev`: a whole local system in one command, keeping its data in $TDP_HOME between runs. */
export async function runDev(env: NodeJS.ProcessEnv): Promise<number> {
  const home = resolve(env.TDP_HOME ?? '.tdp');
  await mkdir(home, { recursive: true });
  const say = (line: string) => process.stdout.write(`${line}\n`);

  const previous = await loadCredentials(home);
  const credentials: DevCredentials = {
    ...previous,
    adminToken: env.TDP_ADMIN_TOKEN ?? previous?.adminToken ?? newAdminToken(),
    secretKeys: env.TDP_SECRET_KEYS ?? previous?.secretKeys ?? generateKeyringEntry('dev1'),
    postgresPassword: previous?.postgresPassword ?? newPostgresPassword(),
  };
  await saveCredentials(home, credentials);

  let databaseUrl = env.DATABASE_URL;
  // The demo app keeps its tables in a database of its own (on DATABASE_URL: its own schema there).
  let demoDatabaseUrl = env.DATABASE_URL;
  let stopPostgres = async () => {};
  if (!databaseUrl) {
    const requestedPort = env.TDP_PG_PORT ? Number(env.TDP_PG_PORT) : preferredPostgresPort;
    const port = (await portIsFree(requestedPort)) ? requestedPort : await freePort();
    say(`Starting embedded PostgreSQL on 127.0.0.1:${port} (data in ${resolve(home, 'postgres')})…`);
    // Its superuser's password is the remembered one (a .tdp from before gets one on this start).
    const postgres = await startEmbeddedPostgres({
      dataDirectory: resolve(home, 'postgres'),
      port,
      password: credentials.postgresPassword,
    });
    stopPostgres = () => postgres.stop();
    try {
      await ensureDatabase(postgres.adminUrl, 'tdp');
      await ensureDatabase(postgres.adminUrl, 'tdp_demo');
    } catch (error) {
      await postgres.stop();
      throw error;
    }
    databaseUrl = postgres.urlFor('tdp');
    demoDatabaseUrl = postgres.urlFor('tdp_demo');
  }

  // Callbacks and storage on the developer's own machine are the point of `tdp dev`: loopback is allowed
  // unless TDP_EGRESS_ALLOW says otherwise (docs/security.md). The server's own address stays reachable,
  // for the development provider is served from it.
  const egressAllow =
    env.TDP_EGRESS_ALLOW !== undefined
      ? [
          ...splitAllowList(env.TDP_EGRESS_ALLOW),
          `${env.TDP_HOST?.trim() || '127.0.0.1'}:${env.TDP_PORT?.trim() || '8080'}`,
        ]
      : [...loopbackAllowList];
  // The development application's files (its resource provider, served by the server: no setup).
  const filesDirectory = join(home, 'files');
  await mkdir(filesDirectory, { recursive: true });
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    const sql = connectDatabase({ url: databaseUrl, maxConnections: 1 });
    try {
      await migrate(sql);
    } finally {
      await sql.end();
    }
    server = await startServer(
      configFromEnv(env, {
        databaseUrl,
        adminToken: credentials.adminToken,
        secretKeyring: parseKeyring(credentials.secretKeys),
        allowInsecureCallbacks: env.TDP_ALLOW_INSECURE_CALLBACKS !== 'false',
        egressAllow,
        developmentFiles: { directory: filesDirectory, providerToken: randomBytes(32).toString('base64url') },
        // Finished tasks past their retention go to the data folder's archive (docs/retention.md).
        archiveDirectory: env.TDP_ARCHIVE_DIR || join(home, 'archive'),
        // A misspelt capability fails with its reason after 30 s instead of waiting for a worker forever.
        ...(env.TDP_SCHEDULE_TO_START_DEFAULT_MS ? {} : { scheduleToStartDefaultMs: 30_000 }),
      }),
      // Ready when what the banner prints works: a script that waits for /readyz may use it at once.
      { readinessHolds: { development: developmentSetup } },
    );
  } catch (error) {
    await stopPostgres();
    throw error;
  }

  reportUnknownVariables(env, server.logger);

  let identity: Awaited<ReturnType<typeof ensureDevelopmentIdentity>>;
  let files: Awaited<ReturnType<typeof useDevelopmentProvider>>;
  let operator: DevOperator;
  try {
    identity = await ensureDevelopmentIdentity(server.identity, {
      fixedKey: env.TDP_DEV_API_KEY || null,
      rememberedKey: previous?.apiKey ?? null,
    });
    files = await useDevelopmentProvider(
      server.identity,
      identity.applicationId,
      server.developmentProvider!,
    );
    // Someone to sign in to the dashboard as, made with the bootstrap token as an admin would.
    operator = await ensureDevelopmentOperator(
      server.url,
      credentials.adminToken,
      previous?.operatorPassword,
    );
  } catch (error) {
    await server.close();
    await stopPostgres();
    throw error;
  }
  Object.assign(credentials, {
    apiKey: identity.apiKey,
    tenantId: identity.tenantId,
    applicationId: identity.applicationId,
    operatorPassword: operator.password,
    ...(identity.callbackSecret ? { callbackSecret: identity.callbackSecret } : {}),
  });
  await saveCredentials(home, credentials);

  // A worker with the built-in capabilities, in a process of its own, on its own key and local database.
  let worker: DevWorker;
  try {
    worker = await startDevWorker(server.url, home, credentials, {
      TDP_EGRESS_ALLOW: egressAllow.join(','),
    });
  } catch (error) {
    await server.close();
    await stopPostgres();
    throw error;
  }

  // Something to try the built-in capabilities on: photos with junk, and a broken archive.
  const samples = await writeSamples(join(home, 'samples')).catch(() => []);

  let demo: DemoApp;
  try {
    demo = await startDemo(env, home, server.url, credentials, demoDatabaseUrl!);
  } catch (error) {
    await worker.stop();
    await server.close();
    await stopPostgres();
    throw error;
  }

  server.health.release('development');
  say('');
  say('TDP is running.');
  say(`  API           ${server.url}/v1`);
  say(`  API docs      ${server.url}/docs`);
  say(`  Dashboard     ${server.url}/dashboard/`);
  say(`                Sign in as ${operator.email} with password ${operator.password}`);
  say(`  OpenAPI       ${server.url}/openapi.json`);
  say(`  Health        ${server.url}/readyz   Metrics ${server.url}/metrics`);
  say(`  API key       ${identity.apiKey}`);
  say(`  Admin token   ${credentials.adminToken}`);
  say(
    `  Worker        ${worker.workerId} (${builtinCapabilities.map((c) => `${c.name}@${c.version}`).join(', ')})`,
  );
  say(
    `  Egress        callbacks and storage may reach ${env.TDP_EGRESS_ALLOW === undefined ? 'loopback (127.0.0.0/8, ::1) and' : `${egressAllow.join(', ')} and`} public addresses (TDP_EGRESS_ALLOW)`,
  );
  say(`  Credentials   ${credentialsPath(home)}`);
  say(`  Sample ZIPs   ${join(home, 'samples')} (${samples.map((sample) => sample.name).join(', ')})`);
  say(
    files === 'registered'
      ? `  Files         ${filesDirectory} (inputs by name, e.g. "holiday-photos.zip"; results in tasks/<task id>/)`
      : `  Files         the development application uses its own resource provider`,
  );
  say('');
  say(`  Demo app      ${demo.url}   ← open it, upload a sample ZIP, watch the order live`);
  say('');
  say('Try it:');
  say(`  curl -H "Authorization: Bearer ${identity.apiKey}" ${server.url}/v1/tasks`);
  say('Press Ctrl-C to stop.');

  await onShutdownSignal(async () => {
    await demo.close();
    await worker.stop();
    await server.close();
    await stopPostgres();
  });
  say('TDP stopped cleanly.');
  return 0;
}

/** The demo business app: its own TDP application, its resource provider registered, on TDP_DEMO_PORT. */
async function startDemo(
  env: NodeJS.ProcessEnv,
  home: string,
  tdpUrl: string,
  credentials: DevCredentials,
  databaseUrl: string,
): Promise<DemoApp> {
  const demoCredentials = await ensureDemoApplication(
    tdpUrl,
    credentials.adminToken,
    credentials.tenantId!,
    credentials.demo ?? null,
  );
  credentials.demo = demoCredentials;
  await saveCredentials(home, credentials);
  const requestedPort = env.TDP_DEMO_PORT ? Number(env.TDP_DEMO_PORT) : preferredDemoPort;
  const port = requestedPort === 0 || (await portIsFree(requestedPort)) ? requestedPort : await freePort();
  const demo = await startDemoApp({
    databaseUrl,
    dataDirectory: join(home, 'demo'),
    port,
    tdpUrl,
    ...demoCredentials,
  });
  try {
    await registerDemoProvider(tdpUrl, credentials.adminToken, demoCredentials, demo.url);
  } catch (error) {
    await demo.close();
    throw error;
  }
  return demo;
}
