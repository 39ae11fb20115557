/**
 * Ready callback endpoints for Node's `http`, Express and Fastify. Each one verifies the signature over
 * the raw body bytes exactly as received, then runs your handler, and answers:
 * - 204 only after your handler resolved (the callback is delivered);
 * - 500 if it threw (TDP sends the callback again later);
 * - 401 for a missing, stale or wrong signature; 400 for a body that is not a callback; 413 for one
 *   over `maxBodyBytes` (TDP treats these as permanent: the delivery goes DEAD).
 * No framework is imported at run time: the types below are the little each one needs.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { renamedCallbackTypes, renamedStatuses } from '@tdp/protocol';
import { type CallbackEvent, type CallbackHeaders, verifyCallback } from './callbacks.ts';
import type { DefinedWorkflow, WorkflowOutputs } from './workflow.ts';

/**
 * A handler's options. Given `workflow` (a `defineWorkflow()` value), `event.data.outputs` is typed by
 * its steps: a callback names no workflow, so give it only to an endpoint whose tasks are all of that
 * workflow (its own `callbackUrl`).
 */
export interface CallbackHandlerOptions<W extends DefinedWorkflow = DefinedWorkflow> {
  /** Types `event.data.outputs`; not read at run time. */
  workflow?: W;
  /** The application's callback secrets; during a rotation, the new one and the previous one. */
  secrets: readonly string[];
  /** How far a signature's time may be from now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** Larger bodies are refused with 413 (default 1 MiB). */
  maxBodyBytes?: number;
  /** Your handling of one callback; the answer waits for it. Deduplicate by `event.eventId`. */
  onCallback(event: CallbackEvent<WorkflowOutputs<W>>, rawBody: Buffer): unknown;
  /** Sees what `onCallback` threw (default: logged with console.error). */
  onError?(error: unknown, event: CallbackEvent<WorkflowOutputs<W>>): void;
}

/** What a callback endpoint answers. */
export interface CallbackAnswer {
  status: number;
  /** Null for 204; otherwise a short JSON reason (nothing from your handler's error). */
  body: { error: string; reason?: string } | null;
}

const defaultMaxBodyBytes = 1024 * 1024;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The framework-free core: checks the raw body and signature (the request's headers, or the
 * `TDP-Signature` value alone; see `verifyCallback`), runs the handler, returns the answer.
 */
export async function answerCallback<W extends DefinedWorkflow = DefinedWorkflow>(
  rawBody: Buffer,
  signature: string | undefined | CallbackHeaders,
  options: CallbackHandlerOptions<W>,
): Promise<CallbackAnswer> {
  if (rawBody.length > (options.maxBodyBytes ?? defaultMaxBodyBytes))
    return { status: 413, body: { error: 'BODY_TOO_LARGE' } };
  const check = verifyCallback(rawBody, signature, options.secrets, {
    ...(options.toleranceSeconds !== undefined ? { toleranceSeconds: options.toleranceSeconds } : {}),
  });
  if (!check.ok) return { status: 401, body: { error: 'SIGNATURE_INVALID', reason: check.reason } };
  const event = parseCallback<WorkflowOutputs<W>>(rawBody);
  if (!event) return { status: 400, body: { error: 'BODY_INVALID' } };
  try {
    await options.onCallback(event, rawBody);
  } catch (error) {
    (options.onError ?? logFailure)(error, event);
    return { status: 500, body: { error: 'HANDLER_FAILED' } };
  }
  return { status: 204, body: null };
}

function parseCallback<Outputs>(rawBody: Buffer): CallbackEvent<Outputs> | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8.decode(rawBody));
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null) return null;
  const event = parsed as Partial<CallbackEvent>;
  const wellFormed =
    typeof event.eventId === 'string' &&
    typeof event.type === 'string' &&
    typeof event.taskId === 'string' &&
    typeof event.sequence === 'number';
  return wellFormed ? spokenNow(parsed as CallbackEvent<Outputs>) : null;
}

/**
 * A delivery of spec 1.0 (one committed before the server spoke 1.1, retried after) read in today's words:
 * `execution.canceled` / `CANCELED` as `execution.cancelled` / `CANCELLED`, and so for cancelling.
 */
function spokenNow<E extends CallbackEvent<unknown>>(event: E): E {
  if (event.specVersion !== '1.0') return event;
  const type = renamedCallbackTypes[event.type] ?? event.type;
  const status = renamedStatuses[event.status] ?? event.status;
  return { ...event, type, status };
}

function logFailure(error: unknown, event: Pick<CallbackEvent, 'eventId' | 'type'>): void {
  console.error(`TDP callback ${event.eventId} (${event.type}): the handler failed; answered 500`, error);
}

/** Reads a request body as bytes, up to `limit` (null past it). */
async function readBody(request: IncomingMessage, limit: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > limit) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function send(response: ServerResponse, answer: CallbackAnswer): void {
  if (answer.body === null) {
    response.writeHead(answer.status).end();
    return;
  }
  response.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body));
}

/** A handler for `http.createServer(handler)` (or a route of your own router). */
export function nodeCallbackHandler<W extends DefinedWorkflow = DefinedWorkflow>(
  options: CallbackHandlerOptions<W>,
): (request: IncomingMessage, response: ServerResponse) => Promise<void> {
  const limit = options.maxBodyBytes ?? defaultMaxBodyBytes;
  return async (request, response) => {
    // Node's http ignores the returned promise: nothing may reject out of here (a client gone mid-body).
    try {
      const body = await readBody(request, limit);
      const answer = body
        ? await answerCallback(body, request.headers, options)
        : { status: 413, body: { error: 'BODY_TOO_LARGE' } };
      send(response, answer);
    } catch {
      response.destroy();
    }
  };
}

/**
 * An Express route handler: `app.post('/tdp/callback', expressCallbackHandler({ … }))`. It reads the
 * body itself; behind `express.raw({ type: '*\/*' })` it takes that Buffer. Behind a parser that already
 * turned the body into something else (`express.json()`), the raw bytes are gone: it answers 500 and says
 * so, rather than verify a re-serialised body.
 */
export function expressCallbackHandler<W extends DefinedWorkflow = DefinedWorkflow>(
  options: CallbackHandlerOptions<W>,
): (request: IncomingMessage & { body?: unknown }, response: ServerResponse) => Promise<void> {
  const node = nodeCallbackHandler(options);
  return async (request, response) => {
    if (Buffer.isBuffer(request.body)) {
      send(response, await answerCallback(request.body, request.headers, options));
    } else if (request.readableEnded) {
      console.error(
        'TDP callback: the body was already parsed; mount expressCallbackHandler before express.json(), or behind express.raw()',
      );
      send(response, { status: 500, body: { error: 'RAW_BODY_UNAVAILABLE' } });
    } else {
      await node(request, response);
    }
  };
}

/** The parts of a Fastify instance and reply the plugin uses. */
export interface FastifyCallbackReply {
  code(statusCode: number): FastifyCallbackReply;
  header(name: string, value: string): FastifyCallbackReply;
  send(payload?: string): FastifyCallbackReply;
}
export interface FastifyCallbackInstance {
  removeContentTypeParser(contentType: string | string[]): unknown;
  addContentTypeParser(
    contentType: string,
    options: { parseAs: 'buffer'; bodyLimit: number },
    parser: (request: unknown, body: Buffer, done: (error: Error | null, body?: Buffer) => void) => void,
  ): unknown;
  post(
    path: string,
    handler: (
      request: { body: unknown; headers: IncomingHttpHeaders },
      reply: FastifyCallbackReply,
    ) => Promise<FastifyCallbackReply>,
  ): unknown;
}

/**
 * A Fastify plugin with the callback route: `app.register(fastifyCallbackPlugin({ path: '/tdp/callback',
 * … }))`. Inside the plugin (and only there) JSON bodies are kept as raw bytes.
 */
export function fastifyCallbackPlugin<W extends DefinedWorkflow = DefinedWorkflow>(
  options: CallbackHandlerOptions<W> & { path?: string },
): (instance: FastifyCallbackInstance) => Promise<void> {
  const bodyLimit = options.maxBodyBytes ?? defaultMaxBodyBytes;
  return async (instance) => {
    instance.removeContentTypeParser(['application/json']);
    instance.addContentTypeParser(
      'application/json',
      { parseAs: 'buffer', bodyLimit },
      (_request, body, done) => done(null, body),
    );
    instance.post(options.path ?? '/', async (request, reply) => {
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const answer = await answerCallback(body, request.headers, options);
      reply.code(answer.status);
      if (answer.body === null) return reply.send();
      return reply.header('content-type', 'application/json').send(JSON.stringify(answer.body));
    });
  };
}
