/**
 * Downloads and uploads through the egress policy, against real listeners on 127.0.0.1: a peer that
 * sends a `Content-Length` body and closes at once (HTTP/1.0 style) leaves the process alive (undici 7's
 * paused-parser assertion, nodejs/undici#5360); a grant URL or a redirect to a refused address reaches
 * nothing and fails for good; the allow-list and the worker's own TDP servers let it through; downloads
 * are capped; and a refused open, closed or non-HTTP port fail the step in the same words.
 */
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AccessGrant } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CapabilityError } from '../src/sdk.ts';
import { downloadTo, type Transfers, uploadFrom, workerTransfers } from '../src/transfer.ts';

interface Listener {
  port: number;
  url: string;
  connections: number;
  close(): Promise<void>;
}

async function listen(server: HttpServer | NetServer): Promise<Listener> {
  const sockets = new Set<Socket>();
  const listener = {
    port: 0,
    url: '',
    connections: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  server.on('connection', (socket: Socket) => {
    listener.connections += 1;
    sockets.add(socket);
    // A client that stops reading (a cap, a refusal) resets the connection: no concern of the server's.
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  listener.port = (server.address() as { port: number }).port;
  listener.url = `http://127.0.0.1:${listener.port}`;
  return listener;
}

const grant = (url: string): AccessGrant =>
  ({ url, method: 'GET', headers: {}, expiresAt: new Date(Date.now() + 600_000).toISOString() }) as never;

const failureOf = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected the transfer to fail');
    },
    (error: unknown) => {
      expect(error).toBeInstanceOf(CapabilityError);
      const e = error as CapabilityError;
      return {
        code: e.code,
        message: e.message,
        retryable: e.options.retryable ?? false,
        detail: e.options.detail,
      };
    },
  );

let directory: string;
/** Storage that answers HTTP/1.0 style: the whole body after a Content-Length, then FIN at once. */
let abrupt: Listener;
let storage: Listener;
let notHttp: Listener;
let closedPort: number;
const uploads: Buffer[] = [];
const body = Buffer.alloc(4 * 1024 * 1024, 0x61);

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), 'tdp-transfer-'));
  abrupt = await listen(
    createNetServer((socket) => {
      socket.once('data', (request) => {
        const size = Number(/\/(\d+)/.exec(request.toString())?.[1] ?? body.length);
        socket.end(
          Buffer.concat([
            Buffer.from(`HTTP/1.0 200 OK\r\nContent-Length: ${size}\r\n\r\n`),
            body.subarray(0, size),
          ]),
        );
      });
    }),
  );
  storage = await listen(
    createHttpServer(async (request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      if (url.pathname === '/to')
        return void response.writeHead(302, { location: url.searchParams.get('url')! }).end();
      if (request.method === 'PUT') {
        const chunks: Buffer[] = [];
        for await (const chunk of request) chunks.push(chunk as Buffer);
        uploads.push(Buffer.concat(chunks));
        return void response.writeHead(201).end();
      }
      response.end('stored file');
    }),
  );
  notHttp = await listen(createNetServer((socket) => socket.end('220 smtp.example ESMTP\r\n')));
  const probe = await listen(createNetServer());
  closedPort = probe.port;
  await probe.close();
});

afterAll(async () => {
  await Promise.all([abrupt.close(), storage.close(), notHttp.close()]);
  await rm(directory, { recursive: true, force: true });
});

/** Transfers as a worker of `servers` with `allow` has them. */
async function withTransfers<T>(
  allow: string[],
  servers: string[],
  run: (transfers: Transfers) => Promise<T>,
  maxDownloadBytes?: number,
): Promise<T> {
  const transfers = workerTransfers(
    { egressAllow: allow, ...(maxDownloadBytes ? { maxDownloadBytes } : {}) },
    servers,
  );
  try {
    return await run(transfers);
  } finally {
    await transfers.close();
  }
}

const signal = new AbortController().signal;
const path = (name: string) => join(directory, name);
const loopback = ['127.0.0.0/8'];
const elsewhere = ['http://tdp.example:8080'];

describe('a peer that closes right after its Content-Length body', () => {
  it.each([256 * 1024, 1024 * 1024, 4 * 1024 * 1024])(
    'is downloaded whole (%i bytes), and the process lives on',
    async (size) => {
      await withTransfers(loopback, elsewhere, async (transfers) => {
        for (let round = 0; round < 5; round += 1) {
          const target = path(`abrupt-${size}-${round}`);
          const bytes = await downloadTo(
            transfers,
            async () => grant(`${abrupt.url}/${size}`),
            target,
            signal,
            0,
          );
          expect(bytes).toBe(size);
          expect((await readFile(target)).equals(body.subarray(0, size))).toBe(true);
        }
      });
    },
  );
});

describe('the egress policy', () => {
  it('refuses a grant URL on loopback: nothing connects, and the step fails for good', async () => {
    const before = storage.connections;
    for (const host of ['127.0.0.1', '2130706433', '0x7f000001', '[::ffff:127.0.0.1]']) {
      const url = `http://${host}:${storage.port}/file`;
      const failure = await withTransfers([], elsewhere, (t) =>
        failureOf(downloadTo(t, async () => grant(url), path('refused'), signal, 3)),
      );
      expect(failure).toMatchObject({ code: 'EGRESS_REFUSED', retryable: false });
      expect(failure.message).not.toMatch(/127|\d{4,}/);
    }
    const upload = await withTransfers([], elsewhere, async (t) => {
      await writeFile(path('out'), 'result');
      return failureOf(uploadFrom(t, grant(`${storage.url}/out`), path('out'), 'text/plain', signal));
    });
    expect(upload).toMatchObject({ code: 'EGRESS_REFUSED', retryable: false });
    expect(storage.connections).toBe(before);
  });

  it('refuses a redirect to loopback from storage it may reach: the target receives nothing', async () => {
    const target = await listen(createHttpServer((_q, r) => r.end('secret')));
    try {
      const url = `${storage.url}/to?url=${encodeURIComponent(`${target.url}/latest/meta-data`)}`;
      const failure = await withTransfers([`127.0.0.1:${storage.port}`], elsewhere, (t) =>
        failureOf(downloadTo(t, async () => grant(url), path('redirected'), signal, 3)),
      );
      expect(failure).toMatchObject({ code: 'EGRESS_REFUSED', retryable: false });
      expect(target.connections).toBe(0);
      // Allowed at both hops, the redirect is followed.
      const bytes = await withTransfers(loopback, elsewhere, (t) =>
        downloadTo(t, async () => grant(url), path('followed'), signal, 0),
      );
      expect(bytes).toBe('secret'.length);
    } finally {
      await target.close();
    }
  });

  it('lets through what the allow-list names, and always the TDP servers the worker was given', async () => {
    const viaList = await withTransfers([`127.0.0.1:${storage.port}`], elsewhere, (t) =>
      downloadTo(t, async () => grant(`${storage.url}/file`), path('listed'), signal, 0),
    );
    expect(viaList).toBe('stored file'.length);
    // TDP's development provider serves grant URLs from the server itself.
    const viaServer = await withTransfers([], [storage.url], (t) =>
      downloadTo(t, async () => grant(`${storage.url}/file`), path('server'), signal, 0),
    );
    expect(viaServer).toBe('stored file'.length);
    await writeFile(path('result'), 'uploaded bytes');
    await withTransfers([], [storage.url], (t) =>
      uploadFrom(t, grant(`${storage.url}/put`), path('result'), 'text/plain', signal),
    );
    expect(uploads.at(-1)?.toString()).toBe('uploaded bytes');
  });

  it('fails a refused open, closed and non-HTTP port in the same words', async () => {
    const before = storage.connections + notHttp.connections;
    const seen = await withTransfers([], elsewhere, (t) =>
      Promise.all(
        [storage.port, closedPort, notHttp.port].map((port) =>
          failureOf(
            downloadTo(t, async () => grant(`http://127.0.0.1:${port}/f`), path(`p${port}`), signal, 3),
          ),
        ),
      ),
    );
    expect(seen[1]).toEqual(seen[0]);
    expect(seen[2]).toEqual(seen[0]);
    expect(storage.connections + notHttp.connections).toBe(before);
    // Where they are allowed, a closed port and one that speaks no HTTP still read alike.
    const [closed, garbage] = await withTransfers(loopback, elsewhere, (t) =>
      Promise.all(
        [closedPort, notHttp.port].map((port) =>
          failureOf(
            downloadTo(t, async () => grant(`http://127.0.0.1:${port}/f`), path(`q${port}`), signal, 0),
          ),
        ),
      ),
    );
    expect(closed).toMatchObject({ code: 'DOWNLOAD_FAILED', retryable: true });
    expect(garbage).toEqual(closed);
  });

  it('stops a download at its size cap, for good', async () => {
    const target = path('capped');
    const failure = await withTransfers(
      loopback,
      elsewhere,
      (t) => failureOf(downloadTo(t, async () => grant(`${abrupt.url}/${1024 * 1024}`), target, signal, 3)),
      256 * 1024,
    );
    expect(failure).toMatchObject({ code: 'DOWNLOAD_TOO_LARGE', retryable: false });
    expect(
      await stat(target).then(
        (s) => s.size,
        () => 0,
      ),
    ).toBeLessThanOrEqual(256 * 1024);
  });
});
