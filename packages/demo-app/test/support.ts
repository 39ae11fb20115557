/**
 * The demo app next to a real TDP (test harness with its loops), its own application, the real worker
 * process with the built-in capabilities, and the sample ZIPs `tdp dev` offers.
 */
import { mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { writeSamples } from '../../cli/src/samples.ts';
import {
  killAllWorkerProcesses,
  startWorkerProcess,
  stopWorkerProcess,
  type WorkerProcess,
} from '../../worker/test/support.ts';
import {
  type DemoApp,
  type DemoCredentials,
  ensureDemoApplication,
  registerDemoProvider,
  startDemoApp,
} from '../src/index.ts';
import { csrfHeader, csrfTokenOf, signedVisitor, visitorCookie } from '../src/visitors.ts';

export interface DemoWorld {
  h: Harness;
  demo: DemoApp;
  credentials: DemoCredentials;
  directory: string;
  samples: { photos: Buffer; broken: Buffer };
  /** (Re)starts the worker process. */
  startWorker(): Promise<void>;
  stopWorker(): Promise<void>;
  close(): Promise<void>;
}

export async function startDemoWorld(
  options: {
    reconcileAfterMs?: number;
    /** TDP's event bus and engine (e.g. NATS and Temporal); by default the in-process bus, native. */
    harness?: Pick<Parameters<typeof startHarness>[0] & {}, 'nats' | 'temporal'>;
  } = {},
): Promise<DemoWorld> {
  const directory = mkdtempSync(join(tmpdir(), 'tdp-demo-'));
  const h = await startHarness({ runLoops: true, allowInsecureCallbacks: true, ...options.harness });
  const app = await h.createApplication();
  const credentials = await ensureDemoApplication(h.url, h.adminToken, app.tenantId, {
    applicationId: app.applicationId,
    apiKey: app.apiKey,
    callbackSecret: app.callbackSecret,
    providerToken: 'provider-token-for-tests',
  });
  const demo = await startDemoApp({
    databaseUrl: h.databaseUrl,
    dataDirectory: directory,
    port: 0,
    tdpUrl: h.url,
    ...credentials,
    reconcileAfterMs: options.reconcileAfterMs ?? 60_000,
    log: () => {},
  });
  await registerDemoProvider(h.url, h.adminToken, credentials, demo.url);
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key as string;
  let worker: WorkerProcess | null = null;
  let workers = 0;
  const startWorker = async () => {
    workers += 1;
    worker = await startWorkerProcess(h.url, workerKey, join(directory, `worker-${workers}.db`), 'node-demo');
  };
  const stopWorker = async () => {
    if (worker) await stopWorkerProcess(worker);
    worker = null;
  };
  await startWorker();
  const sampleFiles = await writeSamples(join(directory, 'samples'));
  const sample = (name: string) => readFile(sampleFiles.find((s) => s.name === name)!.path);
  return {
    h,
    demo,
    credentials,
    directory,
    samples: { photos: await sample('holiday-photos.zip'), broken: await sample('broken.zip') },
    startWorker,
    stopWorker,
    close: async () => {
      await stopWorker();
      killAllWorkerProcesses();
      await demo.close();
      await h.close();
    },
  };
}

/**
 * A browser-like client of the demo app: one visitor (the cookie the app signs for `user`, and the CSRF
 * token its page carries), JSON in and out.
 */
export function visitor(world: Pick<DemoWorld, 'demo' | 'credentials'>, user: string) {
  const key = Buffer.from(world.credentials.visitorKey!, 'base64url');
  const cookie = `${visitorCookie}=${signedVisitor(key, user)}`;
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(`${world.demo.url}${path}`, {
      method,
      headers: {
        cookie,
        ...(method === 'GET' ? {} : { [csrfHeader]: csrfTokenOf(key, user) }),
        ...(body !== undefined && !(body instanceof FormData) ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body !== undefined ? { body: body instanceof FormData ? body : JSON.stringify(body) } : {}),
    });
    const type = response.headers.get('content-type') ?? '';
    const payload = type.includes('json') ? await response.json() : Buffer.from(await response.arrayBuffer());
    return { status: response.status, type, body: payload as any };
  };
  return {
    call,
    upload: (fileName: string, bytes: Buffer) => {
      const form = new FormData();
      form.append('file', new Blob([bytes], { type: 'application/zip' }), fileName);
      return call('POST', '/api/assets', form);
    },
    order: (key: string, body: Record<string, unknown>) =>
      call('POST', '/api/orders', body, { 'idempotency-key': key }),
  };
}
