import { type ErrorCode, errorCatalogue, type FieldError, type Problem, problemType } from '@tdp/protocol';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../../core/shared/errors.ts';
import { translateDatabaseError } from '../../outbound/postgres/database.ts';

export function problem(code: ErrorCode, detail: string, errors?: FieldError[], instance?: string): Problem {
  const entry = errorCatalogue[code];
  return {
    type: problemType(code),
    title: entry.title,
    status: entry.status,
    code,
    detail,
    retryable: entry.retryable,
    ...(errors && errors.length > 0 ? { errors } : {}),
    ...(instance ? { instance } : {}),
  };
}

export function sendProblem(reply: FastifyReply, body: Problem): FastifyReply {
  if (body.status === 503) reply.header('retry-after', '1');
  return reply.code(body.status).type('application/problem+json').send(body);
}

type ValidationIssue = {
  instancePath?: string;
  message?: string;
  params?: Record<string, unknown>;
  keyword?: string;
};

function validationErrors(error: FastifyError): FieldError[] {
  const context = (error as { validationContext?: string }).validationContext ?? 'body';
  return ((error.validation ?? []) as ValidationIssue[]).map((issue) => {
    const extra = issue.params?.additionalProperty;
    return {
      path: `${context === 'body' ? '' : `${context}:`}${issue.instancePath ?? ''}` || '/',
      message: extra ? `unknown field "${String(extra)}"` : (issue.message ?? 'is invalid'),
    };
  });
}

/**
 * The raw HTTP answer to a request Node could not even parse (headers too large, malformed, too slow):
 * a problem like any other, written to the socket, which then closes.
 */
export function clientErrorResponse(error: { code?: string }): string {
  const body =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? problem('HEADERS_TOO_LARGE', 'the request headers exceed the size limit')
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? problem('REQUEST_TIMEOUT', 'the request did not arrive within its deadline')
        : problem('VALIDATION_FAILED', 'the request is not valid HTTP');
  return rawProblemResponse(body);
}

/** A problem as a whole raw HTTP/1.1 answer, for a socket Fastify never sees; the connection closes. */
export function rawProblemResponse(body: Problem, headers: string[] = []): string {
  const text = JSON.stringify(body);
  return [
    `HTTP/1.1 ${body.status} ${body.title}`,
    'Content-Type: application/problem+json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(text)}`,
    ...headers,
    'Connection: close',
    '',
    text,
  ].join('\r\n');
}

/** Maps anything thrown by a route, Fastify or the driver to one problem from the catalogue. */
export function toProblem(error: unknown, request: FastifyRequest): Problem {
  const translated = translateDatabaseError(error);
  if (translated instanceof AppError)
    return problem(translated.code, translated.message, translated.fieldErrors, request.url);
  const fastifyError = translated as FastifyError;
  if (fastifyError.validation) {
    const errors = validationErrors(fastifyError);
    return problem(
      'VALIDATION_FAILED',
      errors.map((e) => `${e.path} ${e.message}`).join('; '),
      errors,
      request.url,
    );
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return problem('PAYLOAD_TOO_LARGE', 'the request body exceeds the size limit', undefined, request.url);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
    case 'FST_ERR_ROUTE_MISSING_CONTENT_TYPE':
      return problem('UNSUPPORTED_MEDIA_TYPE', 'send the body as application/json', undefined, request.url);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return problem('MALFORMED_JSON', fastifyError.message, undefined, request.url);
  }
  if (
    fastifyError instanceof SyntaxError ||
    (fastifyError.statusCode === 400 && /JSON/i.test(fastifyError.message))
  ) {
    return problem('MALFORMED_JSON', 'the request body is not valid JSON', undefined, request.url);
  }
  // Any other refusal of Fastify's own (a request it cannot route or read) is the client's, not ours.
  const status = fastifyError.statusCode ?? 500;
  if (fastifyError.code?.startsWith('FST_') && status >= 400 && status < 500)
    return problem('VALIDATION_FAILED', 'the request is malformed', undefined, request.url);
  return problem(
    'INTERNAL_ERROR',
    'an unexpected error occurred; it has been logged',
    undefined,
    request.url,
  );
}

/** A `preValidation` hook: a request without an Idempotency-Key is refused before anything else. */
export async function requireIdempotencyKey(
  request: FastifyRequest<{ Headers: { 'idempotency-key'?: string } }>,
  reply: FastifyReply,
): Promise<unknown> {
  if (request.headers['idempotency-key']) return undefined;
  return sendProblem(
    reply,
    problem(
      'IDEMPOTENCY_KEY_REQUIRED',
      'send an Idempotency-Key header; reuse it when you retry',
      undefined,
      request.url,
    ),
  );
}
