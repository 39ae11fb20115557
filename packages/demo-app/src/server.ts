/** The demo app's HTTP surface: its JSON API, the endpoints TDP calls, the signed file URLs and its page. */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import helmet from '@fastify/helmet';
import multipart from '@fastify/multipart';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { approvalState, decideOrder } from './approvals.ts';
import { type GrantRequest, grant, receiveOutput } from './provider.ts';
import type { TdpPort } from './sender.ts';
import { assetView, findAsset, findOrder, type OrderRow, orderView } from './store.ts';
import {
  cancelOrder,
  createOrder,
  type DemoDeps,
  DemoError,
  receiveCallback,
  uploadAsset,
} from './useCases.ts';
import {
  csrfTokenOf,
  fromOwnPage,
  newVisitorId,
  signedVisitor,
  visitorCookie,
  visitorOf,
} from './visitors.ts';

const webDirectory = join(dirname(fileURLToPath(import.meta.url)), '..', 'web');

function sendProblem(reply: FastifyReply, status: number, code: string, detail: string, extra: object = {}) {
  return reply
    .code(status)
    .type('application/problem+json')
    .send({ type: `urn:tdp-demo:problem:${code}`, title: code, status, code, detail, ...extra });
}

/**
 * The visitor: a random id in a signed cookie (the demo has no accounts; each browser is one user). A
 * missing or forged cookie gets a new visitor.
 */
function userOf(key: Buffer, request: FastifyRequest, reply: FastifyReply): string {
  const known = visitorOf(key, request);
  if (known) return known;
  const user = newVisitorId();
  const secure = request.protocol === 'https' ? '; Secure' : '';
  reply.header(
    'set-cookie',
    `${visitorCookie}=${signedVisitor(key, user)}; Path=/; HttpOnly; SameSite=Lax; Max-Age=31536000${secure}`,
  );
  return user;
}

export interface DemoServerOptions {
  deps: DemoDeps;
  tdp: TdpPort;
  publicUrl: () => string;
  providerToken: string;
  /** Signs visitors' cookies and derives their CSRF tokens. */
  visitorKey: Buffer;
  /** Where the page's live connection goes (TDP's realtime endpoint), for its Content Security Policy. */
  realtimeOrigins: string[];
}

/**
 * The page's policy: scripts and styles from this app only, never inline; its live connection to TDP;
 * never in a frame.
 */
const securityHeaders = (realtimeOrigins: string[]) => ({
  contentSecurityPolicy: {
    useDefaults: false,
    directives: {
      defaultSrc: ["'self'"],
      scriptSrc: ["'self'"],
      scriptSrcAttr: ["'none'"],
      styleSrc: ["'self'"],
      imgSrc: ["'self'", 'data:'],
      connectSrc: ["'self'", ...realtimeOrigins],
      objectSrc: ["'none'"],
      baseUri: ["'none'"],
      formAction: ["'self'"],
      frameAncestors: ["'none'"],
    },
  },
  xFrameOptions: { action: 'deny' as const },
  referrerPolicy: { policy: 'no-referrer' as const },
  strictTransportSecurity: false,
});

export async function buildDemoServer(options: DemoServerOptions): Promise<FastifyInstance> {
  const { deps, tdp } = options;
  const app = Fastify({ logger: false, bodyLimit: 1_048_576 });
  const key = options.visitorKey;
  const visitor = (request: FastifyRequest, reply: FastifyReply) => userOf(key, request, reply);
  await app.register(helmet, securityHeaders(options.realtimeOrigins));
  // One byte over the limit reaches the file store, which refuses it (busboy would truncate silently).
  await app.register(multipart, { limits: { fileSize: deps.maxUploadBytes + 1, files: 1 } });
  // Callbacks are verified against the exact bytes received.
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (request.url.startsWith('/tdp/callbacks')) return done(null, body);
    try {
      done(null, body === '' ? {} : JSON.parse(body as string));
    } catch {
      done(
        Object.assign(new Error('the body is not JSON'), { statusCode: 400, code: 'BODY_MALFORMED' }),
        undefined,
      );
    }
  });
  // PUTs of worker outputs are streamed to disk by the route itself.
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));

  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, _request, reply) => {
    if (error instanceof DemoError)
      return sendProblem(
        reply,
        error.status,
        error.code,
        error.message,
        error.errors ? { errors: error.errors } : {},
      );
    if (error.statusCode && error.statusCode < 500)
      return sendProblem(reply, error.statusCode, error.code ?? 'BAD_REQUEST', error.message);
    deps.log('request failed', { error: error.message });
    return sendProblem(reply, 500, 'INTERNAL', 'something went wrong; try again');
  });
  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, 404, 'NOT_FOUND', `no route ${request.method} ${request.url}`),
  );

  // A visitor's changes come from the demo's own page (its origin, its CSRF token): another site's form or
  // `text/plain` POST, which the browser would send with the visitor's cookie, is refused.
  app.addHook('onRequest', async (request, reply) => {
    // By the route matched, not the raw URL: `/%61pi/…` reaches the same route as `/api/…`.
    const route = request.routeOptions.url ?? '';
    if (request.method === 'GET' || request.method === 'HEAD' || !route.startsWith('/api/')) return;
    if (!fromOwnPage(key, request))
      return sendProblem(
        reply,
        403,
        'CSRF_REJECTED',
        'this request must come from the demo page itself; reload the page and try again',
      );
  });

  app.post('/api/assets', async (request, reply) => {
    const user = visitor(request, reply);
    if (!request.isMultipart())
      return sendProblem(
        reply,
        415,
        'MULTIPART_REQUIRED',
        'send the ZIP as multipart/form-data (field "file")',
      );
    const file = await request.file();
    if (!file) return sendProblem(reply, 400, 'FILE_REQUIRED', 'the form has no file');
    const asset = await uploadAsset(deps, user, {
      fileName: file.filename,
      mediaType: file.mimetype,
      stream: file.file,
    });
    return reply.code(201).send(assetView(asset));
  });

  app.get<{ Params: { id: string } }>('/api/assets/:id', async (request, reply) => {
    const asset = await findAsset(deps.sql, request.params.id);
    if (!asset || asset.owner_id !== visitor(request, reply))
      return sendProblem(reply, 404, 'ASSET_NOT_FOUND', 'no such asset');
    return assetView(asset);
  });

  app.get<{ Params: { id: string } }>('/api/assets/:id/content', async (request, reply) => {
    const asset = await findAsset(deps.sql, request.params.id);
    if (!asset || asset.owner_id !== visitor(request, reply) || asset.state !== 'READY')
      return sendProblem(reply, 404, 'ASSET_NOT_FOUND', 'no such asset, or it is not ready');
    return reply
      .type(asset.media_type || 'application/zip')
      .header('content-disposition', `attachment; filename="${asset.file_name.replace(/[^\w.-]/g, '_')}"`)
      .header('content-length', asset.size_bytes ?? undefined)
      .send(deps.files.read(asset.id));
  });

  app.post<{ Body: Record<string, unknown> }>('/api/orders', async (request, reply) => {
    const user = visitor(request, reply);
    const key = request.headers['idempotency-key'];
    if (typeof key !== 'string' || key.length < 1 || key.length > 200)
      return sendProblem(
        reply,
        400,
        'IDEMPOTENCY_KEY_REQUIRED',
        'send an Idempotency-Key header (reuse it on retry)',
      );
    const body = request.body && typeof request.body === 'object' ? request.body : {};
    const answer = await createOrder(deps, user, key, body);
    return reply.code(answer.status).send(orderView(answer.order));
  });

  app.get('/api/orders', async (request, reply) => {
    const rows = await deps.sql<OrderRow[]>`
      SELECT * FROM demo.processing_order WHERE owner_id = ${visitor(request, reply)}
      ORDER BY created_at DESC LIMIT 100`;
    return { items: rows.map(orderView) };
  });

  app.get<{ Params: { id: string } }>('/api/orders/:id', async (request, reply) => {
    const order = await findOrder(deps.sql, request.params.id);
    if (!order || order.owner_id !== visitor(request, reply))
      return sendProblem(reply, 404, 'ORDER_NOT_FOUND', 'no such order');
    return orderView(order);
  });

  app.get<{ Params: { id: string } }>('/api/orders/:id/timeline', async (request, reply) => {
    const order = await findOrder(deps.sql, request.params.id);
    if (!order || order.owner_id !== visitor(request, reply))
      return sendProblem(reply, 404, 'ORDER_NOT_FOUND', 'no such order');
    const events = await deps.sql<{ at: Date; kind: string; detail: object }[]>`
      SELECT at, kind, detail FROM demo.order_event WHERE order_id = ${order.id} ORDER BY id`;
    return { items: events.map((e) => ({ at: e.at.toISOString(), kind: e.kind, detail: e.detail })) };
  });

  app.post<{ Params: { id: string } }>('/api/orders/:id/cancel', async (request, reply) =>
    orderView(await cancelOrder(deps, visitor(request, reply), request.params.id)),
  );

  app.get<{ Params: { id: string } }>('/api/orders/:id/approval', async (request, reply) =>
    approvalState(deps, tdp, visitor(request, reply), request.params.id),
  );

  for (const decision of ['approve', 'reject'] as const)
    app.post<{ Params: { id: string } }>(`/api/orders/:id/${decision}`, async (request, reply) =>
      decideOrder(deps, tdp, visitor(request, reply), request.params.id, decision),
    );

  // The page's realtime token comes from here: the backend holds the TDP key, the browser never does.
  app.get('/api/realtime/token', async (request, reply) => {
    const user = visitor(request, reply);
    const token = await tdp.client.createConnectionToken(user);
    return { token: token.token, url: token.url, userId: user };
  });

  app.post('/tdp/callbacks', async (request, reply) => {
    const raw = typeof request.body === 'string' ? request.body : '';
    const header = request.headers['tdp-signature'];
    const result = await receiveCallback(deps, raw, Array.isArray(header) ? header[0] : header);
    return reply.code(200).send(result);
  });

  app.post<{ Body: GrantRequest }>('/tdp/grants', async (request, reply) => {
    if (request.headers.authorization !== `Bearer ${options.providerToken}`)
      return sendProblem(reply, 401, 'UNAUTHORIZED', 'the provider token does not match');
    const idempotencyKey = request.body?.idempotencyKey ?? request.headers['idempotency-key'];
    return grant(deps, tdp, options.publicUrl(), { ...request.body, idempotencyKey });
  });

  const signedAccess = (request: FastifyRequest<{ Params: { id: string } }>) =>
    deps.files.verify(request.params.id, request.query as Record<string, string>, deps.now().getTime());

  app.get<{ Params: { id: string } }>('/files/:id', async (request, reply) => {
    const access = signedAccess(request);
    if (access?.method !== 'GET')
      return sendProblem(reply, 403, 'SIGNATURE_INVALID', 'the URL is not signed for this, or it expired');
    const size = await deps.files.size(access.assetId);
    if (size === null) return sendProblem(reply, 404, 'ASSET_NOT_FOUND', 'no such file');
    return reply
      .type('application/octet-stream')
      .header('content-length', size)
      .send(deps.files.read(access.assetId));
  });

  app.put<{ Params: { id: string } }>('/files/:id', async (request, reply) => {
    const access = signedAccess(request);
    if (access?.method !== 'PUT' || access.maxBytes === null)
      return sendProblem(reply, 403, 'SIGNATURE_INVALID', 'the URL is not signed for this, or it expired');
    await receiveOutput(deps, access.assetId, access.maxBytes, request.raw);
    return reply.code(204).send();
  });

  const page = (file: string, type: string) => async (_request: FastifyRequest, reply: FastifyReply) =>
    reply
      .type(type)
      .header('cache-control', 'no-cache')
      .send(await readFile(join(webDirectory, file)));
  // The visitor's cookie is set with the page, before its scripts ask for orders and a realtime token
  // at the same time (each would otherwise mint a different visitor); the page carries its CSRF token.
  app.get('/', async (request, reply) => {
    const token = csrfTokenOf(key, visitor(request, reply));
    const html = (await readFile(join(webDirectory, 'index.html'), 'utf8')).replace('{{csrfToken}}', token);
    return reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(html);
  });
  app.get('/app.js', page('app.js', 'text/javascript; charset=utf-8'));
  app.get('/style.css', page('style.css', 'text/css; charset=utf-8'));
  const centrifugeBundle = join(
    dirname(createRequire(import.meta.url).resolve('centrifuge')),
    '..',
    'dist',
    'centrifuge.js',
  );
  app.get('/vendor/centrifuge.js', async (_request, reply) =>
    reply
      .type('text/javascript; charset=utf-8')
      .header('cache-control', 'max-age=3600')
      .send(await readFile(centrifugeBundle)),
  );
  app.get('/healthz', async () => ({ ok: true }));
  return app;
}
