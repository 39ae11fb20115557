/**
 * The worker's health endpoint, for an orchestrator's probes: `GET /healthz` answers 200 while the
 * runtime has not stopped on a local error and TDP accepts its key (liveness: a worker whose key is
 * refused keeps its results and waits, but someone has to give it a key), `GET /readyz` 200 only while
 * it takes work (registered, not draining). Both answer the runtime's status as JSON; nothing secret is
 * in it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { WorkerRuntime } from './runtime.ts';

export interface HealthServer {
  readonly url: string;
  close(): Promise<void>;
}

export async function serveHealth(runtime: WorkerRuntime, port: number, host: string): Promise<HealthServer> {
  const server: Server = createServer((request, response) => {
    const status = runtime.status();
    const path = (request.url ?? '').split('?')[0];
    const healthy =
      path === '/healthz'
        ? status.state !== 'FAILED' && status.state !== 'KEY_REFUSED'
        : path === '/readyz'
          ? status.state === 'READY'
          : null;
    if (request.method !== 'GET' || healthy === null) {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"status":"not found"}');
      return;
    }
    response
      .writeHead(healthy ? 200 : 503, { 'content-type': 'application/json', 'cache-control': 'no-store' })
      .end(JSON.stringify({ status: healthy ? 'ok' : 'unavailable', ...status }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
