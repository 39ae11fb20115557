/**
 * A business application's storage and resource provider, as small as a test needs: it keeps files in
 * memory, answers TDP's grant requests (docs/resource-provider.md) with URLs to itself, and serves GET
 * and PUT on those URLs (a PUT over the granted size is refused).
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
  close(): Promise<void>;
}

const read = async (request: IncomingMessage) => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
};

export async function startFileStore(): Promise<FileStore> {
  const token = randomBytes(16).toString('hex');
  const files = new Map<string, Buffer>();
  const grantRequests: Record<string, unknown>[] = [];
  /** signature → what it allows */
  const signed = new Map<string, { ref: string; method: 'GET' | 'PUT'; maxBytes: number | null }>();
  let base = '';
  let counter = 0;
  const server: Server = createServer(async (request, response) => {
    const url = new URL(request.url ?? '/', base);
    if (request.method === 'POST' && url.pathname === '/grants') {
      if (request.headers.authorization !== `Bearer ${token}`) return void response.writeHead(401).end();
      const body = JSON.parse((await read(request)).toString());
      grantRequests.push(body);
      const artifact = body.purpose === 'ARTIFACT';
      const ref = artifact ? `out-${++counter}` : (body.resourceRef as string);
      if (!artifact && body.purpose === 'DOWNLOAD' && !files.has(ref))
        return void response.writeHead(404).end();
      const signature = randomBytes(12).toString('hex');
      const method = body.purpose === 'DOWNLOAD' ? 'GET' : 'PUT';
      const maxBytes = artifact ? (body.artifact.maxBytes as number) : null;
      signed.set(signature, { ref, method, maxBytes });
      response.writeHead(200, { 'content-type': 'application/json' });
      return void response.end(
        JSON.stringify({
          url: `${base}/files/${encodeURIComponent(ref)}?sig=${signature}`,
          method,
          expiresAt: new Date(Date.now() + 600_000).toISOString(),
          resourceRef: ref,
          ...(maxBytes ? { maxBytes } : {}),
        }),
      );
    }
    const match = /^\/files\/(.+)$/.exec(url.pathname);
    const grant = signed.get(url.searchParams.get('sig') ?? '');
    if (!match || !grant || grant.ref !== decodeURIComponent(match[1]!) || grant.method !== request.method)
      return void response.writeHead(403).end();
    if (request.method === 'GET') {
      const file = files.get(grant.ref);
      if (!file) return void response.writeHead(404).end();
      response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': file.length });
      return void response.end(file);
    }
    const body = await read(request);
    if (grant.maxBytes !== null && body.length > grant.maxBytes) return void response.writeHead(413).end();
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
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
