import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { jsonShapeFault } from '@tdp/protocol';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import secureJson from 'secure-json-parse';
import { AppError, RetryLaterError } from '../../../core/shared/errors.ts';
import { limitConnectionsPerAddress } from './connectionLimits.ts';
import { clientErrorResponse, problem, sendProblem, toProblem } from './problems.ts';
import { RateLimitedError } from './rateLimits.ts';
import { ProblemSchema, problemResponses } from './schemas.ts';
import { allowInlineStyles, securityHeaders, sendSecurityHeaders } from './securityHeaders.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/**
 * The proxies whose X-Forwarded-For/-Proto/-Host the server believes (so `request.protocol` and
 * `request.ip` are the client's): false for none, a hop count, or addresses, CIDRs and proxy-addr's
 * names (`loopback`, `linklocal`, `uniquelocal`) separated by commas.
 */
export type TrustProxy = false | number | string;

export interface HttpOptions {
  logger: Logger;
  bodyLimitBytes: number;
  /** Bodies nesting deeper are refused with JSON_TOO_DEEP (jsonLimits.ts in the protocol). */
  jsonMaxDepth: number;
  /** A request still unanswered after this long gets a 503 REQUEST_TIMEOUT. */
  requestDeadlineMs: number;
  publicUrl: string;
  version: string;
  /** Answers some requests before Fastify sees them (the realtime gateway's HTTP endpoints); true if it did. */
  rawHandler?: (request: IncomingMessage, response: ServerResponse) => boolean;
  /** Which proxies' X-Forwarded-* headers count (Fastify's trustProxy); false: none. */
  trustProxy?: TrustProxy;
  /** Read deadlines and connection limits of the listener. */
  listener: ListenerLimits;
}

/** How long a client may take to send a request, and how many connections one address may hold. */
export interface ListenerLimits {
  headersTimeoutMs: number;
  requestReadTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnectionsPerIp: number;
  /** Told of each connection refused for the per-address limit (a metric). */
  connectionRefused?: () => void;
}

/**
 * The longest path parameter the router takes: a 255-character value (an external reference), each
 * character up to 4 UTF-8 bytes percent-encoded (12 characters). The schemas then bound the decoded value.
 */
const longestPathParameter = 255 * 12;

export interface RegisteredRoute {
  method: string;
  /** The path as registered, with its parameters' patterns (e.g. `/admin/v1/tasks/:id(^…)::correct`). */
  url: string;
}
const registeredRoutes = new WeakMap<FastifyInstance, RegisteredRoute[]>();

/** Every route registered on an app made by `createHttpApp` (HEAD ones included), in order. */
export const routesOf = (app: FastifyInstance): RegisteredRoute[] => [...(registeredRoutes.get(app) ?? [])];

/**
 * The Fastify instance with what every surface shares: strict validation (no coercion and no silently
 * dropped fields in bodies), problem+json errors, request deadlines, OpenAPI at /openapi.json, docs at /docs.
 */
export async function createHttpApp(options: HttpOptions): Promise<FastifyInstance> {
  const rawHandler = options.rawHandler;
  const limits = options.listener;
  const app = Fastify({
    // A slow client (headers or body a byte at a time) is cut at its read deadline, checked every
    // second at most (Node's default check runs every 30 s, so a stalled socket lived ~80 s).
    serverFactory: (handler: (request: IncomingMessage, response: ServerResponse) => void) => {
      const server = createServer(
        {
          headersTimeout: limits.headersTimeoutMs,
          requestTimeout: limits.requestReadTimeoutMs,
          keepAliveTimeout: limits.keepAliveTimeoutMs,
          connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
        },
        (request, response) => {
          if (!rawHandler?.(request, response)) handler(request, response);
        },
      );
      limitConnectionsPerAddress(server, limits.maxConnectionsPerIp, () => limits.connectionRefused?.());
      return server;
    },
    loggerInstance: options.logger as FastifyBaseLogger,
    // A hop count as a function: Fastify's types take no number.
    trustProxy:
      typeof options.trustProxy === 'number'
        ? (_address: string, hop: number) => hop < (options.trustProxy as number)
        : (options.trustProxy ?? false),
    bodyLimit: options.bodyLimitBytes,
    routerOptions: { maxParamLength: longestPathParameter },
    // The router's own refusals (a malformed URL, a path parameter too long) are problems like any other.
    frameworkErrors: (error, request, reply) => sendProblem(reply, toProblem(error, request)),
    clientErrorHandler: (error, socket) => {
      if ((error as { code?: string }).code === 'ECONNRESET' || socket.destroyed) return;
      if (socket.writable) socket.write(clientErrorResponse(error as { code?: string }));
      socket.destroy(error);
    },
    genReqId: (request) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.-]{1,128}$/.test(given) ? given : randomUUID();
    },
    // Our own onRequest hook answers during shutdown, as a problem+json like every other error.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // Per-request lines come from our onResponse hook at debug level; errors are logged by the error handler.
    logController: new LogController({ disableRequestLogging: true }),
  });

  const bodyAjv = addFormats(
    new Ajv({
      allErrors: true,
      removeAdditional: false,
      coerceTypes: false,
      useDefaults: true,
      strict: false,
    }),
  );
  const otherAjv = addFormats(
    new Ajv({
      allErrors: true,
      removeAdditional: false,
      coerceTypes: true,
      useDefaults: true,
      strict: false,
    }),
  );
  for (const ajv of [bodyAjv, otherAjv]) ajv.addSchema(ProblemSchema);
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? bodyAjv : otherAjv).compile(schema),
  );

  app.addSchema(ProblemSchema);

  // Every route as registered, so a test can hold each operator route to a declared role (operatorMatrix).
  const routes: RegisteredRoute[] = [];
  registeredRoutes.set(app, routes);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url });
  });

  // Any operation can answer an error (401, 404, 503 REQUEST_TIMEOUT…): every documented route says so,
  // as problem+json, unless it lists its own. Routes are registered after this hook, so it sees them all.
  app.addHook('onRoute', (route) => {
    const schema = (route.schema ?? {}) as { hide?: boolean; response?: Record<string, unknown> };
    if (schema.hide) return;
    route.schema = { ...schema, response: { ...problemResponses, ...schema.response } };
  });

  // JSON bodies, parsed safely (no __proto__ / constructor poisoning) and within TDP's limits (depth,
  // no unpaired surrogate: jsonLimits.ts), for every route before any handler; an empty body is "no
  // body", which endpoints with optional bodies accept and the others reject through their schema.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    let value: unknown;
    try {
      value = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
    } catch (error) {
      return done(
        Object.assign(error as Error, { statusCode: 400, code: 'FST_ERR_CTP_INVALID_JSON_BODY' }),
        undefined,
      );
    }
    const fault = jsonShapeFault(value, options.jsonMaxDepth);
    if (fault) return done(new AppError(fault.code, fault.detail), undefined);
    done(null, value);
  });

  // Security headers on every answer (CSP, nosniff, no referrer, no framing); the dashboard widens its CSP.
  sendSecurityHeaders(app, securityHeaders());

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'TDP API',
        version: options.version,
        description:
          'Durable task platform. Applications authenticate with `Authorization: Bearer <api key>`; the admin API with ' +
          '`Authorization: Bearer <TDP_ADMIN_TOKEN>`. Errors are `application/problem+json` with a stable `code`.',
      },
      servers: [{ url: options.publicUrl }],
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'Application API key (tdp_…)' },
          adminToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'An operator token (tdpo_…), or the bootstrap TDP_ADMIN_TOKEN while it is on',
          },
          workerKey: {
            type: 'http',
            scheme: 'bearer',
            description: 'Worker key (tdpw_…), from POST /admin/v1/worker-credentials',
          },
          userToken: { type: 'http', scheme: 'bearer', description: 'User token, from POST /v1/user-tokens' },
          executionToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'Execution token, from activating a step or registering an execution',
          },
        },
      },
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (json.$id as string) ?? `def-${i}`,
    },
  });
  // Swagger UI injects its own <style> elements: the docs pages alone may have inline styles (not scripts).
  await app.register(swaggerUi, { routePrefix: '/docs', transformStaticCSP: allowInlineStyles });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  app.addHook('onResponse', async (request, reply) => {
    request.log.debug(
      {
        method: request.method,
        url: request.routeOptions.url,
        status: reply.statusCode,
        ms: reply.elapsedTime,
      },
      'request',
    );
  });

  // Shutting down: answers to requests already in flight close their connection, so that keep-alive
  // connections do not hold the server open after the last response.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async (request, reply) => {
    if (closing) {
      return sendProblem(
        reply.header('connection', 'close'),
        problem(
          'SHUTTING_DOWN',
          'the server is shutting down; retry on another instance or shortly',
          undefined,
          request.url,
        ),
      );
    }
  });
  app.addHook('onSend', async (_request, reply, payload) => {
    if (closing) reply.header('connection', 'close');
    return payload;
  });

  // Every request is answered within its deadline: 503 REQUEST_TIMEOUT, retryable (the work may still
  // commit; a retry with the same key or event id then gets its answer). Not Fastify's handlerTimeout:
  // it stops its timer on the request's 'close', which Node emits once a body has been read, so it
  // never fired for a POST. Streams (SSE) hijack their reply or have sent their headers: left alone.
  app.addHook('onRequest', (request, reply, done) => {
    const timer = setTimeout(() => {
      if (reply.sent || reply.raw.headersSent) return;
      sendProblem(
        reply,
        problem('REQUEST_TIMEOUT', 'the request did not finish within its deadline', undefined, request.url),
      );
    }, options.requestDeadlineMs);
    reply.raw.once('close', () => clearTimeout(timer));
    done();
  });

  app.setErrorHandler((error, request, reply) => {
    const body = toProblem(error, request);
    if (body.status >= 500) request.log.error({ err: error, code: body.code }, 'request failed');
    if (reply.sent) return;
    if (error instanceof RateLimitedError) reply.headers(error.headers());
    else if (error instanceof RetryLaterError) reply.header('retry-after', String(error.retryAfterSeconds));
    return sendProblem(reply, body);
  });

  app.setNotFoundHandler((request, reply) =>
    sendProblem(
      reply,
      problem(
        'ROUTE_NOT_FOUND',
        `no endpoint ${request.method} ${request.url.split('?')[0]}`,
        undefined,
        request.url,
      ),
    ),
  );

  return app;
}
