/**
 * The demo business application's composition root: its database, file store, TDP client, loops and
 * HTTP server. `tdp dev` starts it next to TDP; tests start it against a harness.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createTdpClient } from '@tdp/sdk';
import { connectDemoDatabase, migrateDemo } from './database.ts';
import { FileStore } from './files.ts';
import { reconcileStaleOrders, sendDueCommands, type TdpPort } from './sender.ts';
import { buildDemoServer } from './server.ts';
import type { DemoDeps } from './useCases.ts';

export interface DemoAppConfig {
  databaseUrl: string;
  /** Files live here (uploads and worker outputs). */
  dataDirectory: string;
  host?: string;
  /** 0 picks a free port. */
  port: number;
  /** How TDP and browsers reach this app; defaults to http://host:port. */
  publicUrl?: string;
  tdpUrl: string;
  apiKey: string;
  applicationId: string;
  callbackSecret: string;
  /** The bearer token TDP sends to the resource-provider endpoint. */
  providerToken: string;
  /**
   * Signs visitors' cookies (base64url, made at setup and kept with the credentials); unset: a new one
   * per start, which forgets every visitor.
   */
  visitorKey?: string;
  /** Signs file URLs; a new one per start is fine (grants live 15 minutes). */
  signingKey?: Buffer;
  maxUploadBytes?: number;
  /** Orders open and unchanged this long are compared with TDP's view (default 30 s). */
  reconcileAfterMs?: number;
  workflows?: TdpPort['workflows'];
  log?: (line: string, fields?: object) => void;
}

export interface DemoApp {
  url: string;
  close(): Promise<void>;
  /** Runs the sender and the reconciler once now (tests). */
  tick(): Promise<void>;
}

export const demoWorkflows = {
  cleanOnly: 'demo-archive-clean',
  cleanThenWatermark: 'demo-archive-clean-watermark',
  version: '1',
} as const;

/** TDP's realtime endpoint is on TDP's own host: the page connects there with ws: or wss:. */
function realtimeOriginsOf(tdpUrl: string): string[] {
  const { host } = new URL(tdpUrl);
  return [`ws://${host}`, `wss://${host}`];
}

export async function startDemoApp(config: DemoAppConfig): Promise<DemoApp> {
  const sql = connectDemoDatabase(config.databaseUrl);
  await migrateDemo(sql);
  const files = new FileStore(join(config.dataDirectory, 'assets'), config.signingKey ?? randomBytes(32));
  await files.init();
  const log =
    config.log ??
    ((line: string, fields?: object) =>
      process.stderr.write(`[demo] ${line} ${JSON.stringify(fields ?? {})}\n`));

  let wake = () => {};
  const deps: DemoDeps = {
    sql,
    files,
    now: () => new Date(),
    callbackSecret: () => config.callbackSecret,
    applicationId: config.applicationId,
    maxUploadBytes: config.maxUploadBytes ?? 200 * 1024 * 1024,
    wakeSender: () => wake(),
    log,
  };
  let publicUrl = config.publicUrl ?? '';
  const tdp: TdpPort = {
    // No retries inside a call: the command outbox tries again itself (sender.ts).
    client: createTdpClient({ baseUrl: config.tdpUrl, apiKey: config.apiKey, retries: 0 }),
    get callbackUrl() {
      return `${publicUrl}/tdp/callbacks`;
    },
    workflows: config.workflows ?? demoWorkflows,
  };
  const app = await buildDemoServer({
    deps,
    tdp,
    publicUrl: () => publicUrl,
    providerToken: config.providerToken,
    visitorKey: config.visitorKey ? Buffer.from(config.visitorKey, 'base64url') : randomBytes(32),
    realtimeOrigins: realtimeOriginsOf(config.tdpUrl),
  });
  const address = await app.listen({ host: config.host ?? '127.0.0.1', port: config.port });
  const url = address.replace('[::1]', 'localhost');
  publicUrl ||= url;

  // The sender: woken after each commit that leaves a command, and every second for retries.
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  const runSender = async () => {
    try {
      while (!stopped && (await sendDueCommands(deps, tdp)) > 0) {}
    } catch (error) {
      log('command sender failed', { error: String(error) });
    }
  };
  const schedule = (delayMs: number) => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      running = running.then(runSender).finally(() => {
        if (!stopped) schedule(1_000);
      });
    }, delayMs);
  };
  wake = () => {
    if (!stopped) schedule(0);
  };
  schedule(0);
  const reconcileAfterMs = config.reconcileAfterMs ?? 30_000;
  const reconciler = setInterval(
    () => {
      running = running.then(() =>
        reconcileStaleOrders(deps, tdp, reconcileAfterMs).then(
          () => {},
          (error) => log('reconciler failed', { error: String(error) }),
        ),
      );
    },
    Math.max(1_000, Math.min(10_000, reconcileAfterMs / 3)),
  );

  return {
    url: publicUrl,
    tick: async () => {
      await runSender();
      await reconcileStaleOrders(deps, tdp, reconcileAfterMs);
    },
    close: async () => {
      stopped = true;
      clearTimeout(timer);
      clearInterval(reconciler);
      await app.close();
      await running;
      await sql.end();
    },
  };
}
