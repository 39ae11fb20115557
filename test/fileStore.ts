/**
 * A business application's storage and resource provider, as small as a test needs: it keeps files in
 * memory, answers TDP's grant requests (docs/resource-provider.md) with URLs to itself, and serves GET
 * (with Range) and PUT on those URLs until they expire (a PUT over the granted size is refused). An
 * output asked again with the same idempotency key is the same allocation.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';

export interface FileStore {
  url: string;
  /** The provider endpoint to register for the application. */
  providerUrl: string;
  token: string;
  files: Map<string, Buffer>;
  grantRequests: Record<string, unknown>[];
  /** Every GET and PUT on a file URL, as asked, with the status it got. */
  transfers: { method: string; path: string; range: string | undefined; status: number }[];
  close(): Promise<void>;
}

export interface FileStoreOptions {
  /** How long its URLs last (default 10 minutes). */
  grantTtlMs?: number;
  /** The first download sends this many bytes, then stalls `stallMs` and breaks off. */
  breakFirstDownload?: { afterBytes: number; stallMs: number };
}

const read = async (request: IncomingMessage) => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
};

export async function startFileStore(options: FileStoreOptions = {}): Promise<FileStore> {
  const token = randomBytes(16).toString('hex');
  const files = new Map<string, Buffer>();
  const grantRequests: Record<string, unknown>[] = [];
  const transfers: FileStore['transfers'] = [];
  const allocations = new Map<string, string>();
  let breakDownload = options.breakFirstDownload ?? null;
  /** signature → what it allows */
  const signed = new Map<
    string,
    { ref: string; method: 'GET' | 'PUT'; maxBytes: number | null; expiresAt: number }
  >();
  let base = '';
  let counter = 0;
  const server: Server = createServer(async (request, response) => {
    const url = new URL(request.url ?? '/', base);
    if (request.method === 'POST' && url.pathname === '/grants') {
      if (request.headers.authorization !== `Bearer ${token}`) return void response.writeHead(401).end();
      const body = JSON.parse((await read(request)).toString());
      grantRequests.push(body);
      const artifact = body.purpose === 'ARTIFACT';
      const key = typeof body.idempotencyKey === 'string' ? body.idempotencyKey : null;
      const ref = artifact
        ? ((key && allocations.get(key)) ?? `out-${++counter}`)
        : (body.resourceRef as string);
      if (artifact && key) allocations.set(key, ref);
      if (!artifact && body.purpose === 'DOWNLOAD' && !files.has(ref))
        return void response.writeHead(404).end();
      const signature = randomBytes(12).toString('hex');
      const method = body.purpose === 'DOWNLOAD' ? 'GET' : 'PUT';
      const maxBytes = artifact ? (body.artifact.maxBytes as number) : null;
      const expiresAt = Date.now() + (options.grantTtlMs ?? 600_000);
      signed.set(signature, { ref, method, maxBytes, expiresAt });
      response.writeHead(200, { 'content-type': 'application/json' });
      return void response.end(
        JSON.stringify({
          url: `${base}/files/${encodeURIComponent(ref)}?sig=${signature}`,
          method,
          expiresAt: new Date(expiresAt).toISOString(),
          resourceRef: ref,
          ...(maxBytes ? { maxBytes } : {}),
        }),
      );
    }
    const match = /^\/files\/(.+)$/.exec(url.pathname);
    const grant = signed.get(url.searchParams.get('sig') ?? '');
    const transfer = {
      method: request.method ?? '',
      path: `${url.pathname}${url.search}`,
      range: request.headers.range,
      status: 200,
    };
    transfers.push(transfer);
    const refuse = (status: number) => {
      transfer.status = status;
      response.writeHead(status).end();
    };
    if (!match || !grant || grant.ref !== decodeURIComponent(match[1]!) || grant.method !== request.method)
      return refuse(403);
    if (Date.now() > grant.expiresAt) return refuse(403);
    if (request.method === 'GET') {
      const file = files.get(grant.ref);
      if (!file) return refuse(404);
      const from = Number(/^bytes=(\d+)-$/.exec(request.headers.range ?? '')?.[1] ?? 0);
      transfer.status = from > 0 ? 206 : 200;
      response.writeHead(transfer.status, {
        'content-type': 'application/octet-stream',
        'content-length': file.length - from,
        ...(from > 0 ? { 'content-range': `bytes ${from}-${file.length - 1}/${file.length}` } : {}),
      });
      const broken = breakDownload;
      if (!broken) return void response.end(file.subarray(from));
      breakDownload = null;
      response.write(file.subarray(from, from + broken.afterBytes));
      setTimeout(() => response.destroy(), broken.stallMs);
      return;
    }
    const body = await read(request);
    if (grant.maxBytes !== null && body.length > grant.maxBytes) return refuse(413);
    files.set(grant.ref, body);
    response.writeHead(200).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url: base,
    providerUrl: `${base}/grants`,
    token,
    files,
    grantRequests,
    transfers,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
