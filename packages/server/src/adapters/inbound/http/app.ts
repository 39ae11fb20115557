import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import secureJson from 'secure-json-parse';
import { clientErrorResponse, problem, sendProblem, toProblem } from './problems.ts';
import { RateLimitedError } from './rateLimits.ts';
import { ProblemSchema, problemResponses } from './schemas.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

export interface HttpOptions {
  logger: Logger;
  bodyLimitBytes: number;
  /** A request still unanswered after this long gets a 503 REQUEST_TIMEOUT. */
  requestDeadlineMs: number;
  publicUrl: string;
  version: string;
  /** Answers some requests before Fastify sees them (the realtime gateway's HTTP endpoints); true if it did. */
  rawHandler?: (request: IncomingMessage, response: ServerResponse) => boolean;
}

/**
 * The longest path parameter the router takes: a 255-character value (an external reference), each
 * character up to 4 UTF-8 bytes percent-encoded (12 characters). The schemas then bound the decoded value.
 */
const longestPathParameter = 255 * 12;

/**
 * The Fastify instance with what every surface shares: strict validation (no coercion and no silently
 * dropped fields in bodies), problem+json errors, request deadlines, OpenAPI at /openapi.json, docs at /docs.
 */
export async function createHttpApp(options: HttpOptions): Promise<FastifyInstance> {
  const rawHandler = options.rawHandler;
  const app = Fastify({
    ...(rawHandler
      ? {
          serverFactory: (handler: (request: IncomingMessage, response: ServerResponse) => void) =>
            createServer((request, response) => {
              if (!rawHandler(request, response)) handler(request, response);
            }),
        }
      : {}),
    loggerInstance: options.logger as FastifyBaseLogger,
    bodyLimit: options.bodyLimitBytes,
    routerOptions: { maxParamLength: longestPathParameter },
    // The router's own refusals (a malformed URL, a path parameter too long) are problems like any other.
    frameworkErrors: (error, request, reply) => sendProblem(reply, toProblem(error, request)),
    clientErrorHandler: (error, socket) => {
      if ((error as { code?: string }).code === 'ECONNRESET' || socket.destroyed) return;
      if (socket.writable) socket.write(clientErrorResponse(error as { code?: string }));
      socket.destroy(error);
    },
    requestTimeout: options.requestDeadlineMs * 2,
    connectionTimeout: options.requestDeadlineMs * 2,
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

  // Any operation can answer an error (401, 404, 503 REQUEST_TIMEOUT…): every documented route says so,
  // as problem+json, unless it lists its own. Routes are registered after this hook, so it sees them all.
  app.addHook('onRoute', (route) => {
    const schema = (route.schema ?? {}) as { hide?: boolean; response?: Record<string, unknown> };
    if (schema.hide) return;
    route.schema = { ...schema, response: { ...problemResponses, ...schema.response } };
  });

  // JSON bodies, parsed safely (no __proto__ / constructor poisoning); an empty body is "no body", which
  // endpoints with optional bodies accept and the others reject through their schema.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' }));
    } catch (error) {
      done(
        Object.assign(error as Error, { statusCode: 400, code: 'FST_ERR_CTP_INVALID_JSON_BODY' }),
        undefined,
      );
    }
  });

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
          adminToken: { type: 'http', scheme: 'bearer', description: 'TDP_ADMIN_TOKEN' },
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
  await app.register(swaggerUi, { routePrefix: '/docs' });
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
