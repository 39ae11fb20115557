/**
 * The one way to make a request on a tenant's behalf: through an egress Agent (`agent.ts`), with a cap on
 * the answer's size and on its time, and redirects either returned as they are or followed a few hops,
 * each hop connecting through the same checks.
 *
 * The body is read with a dispatch handler that never pauses undici's HTTP/1 parser: a paused parser
 * meeting the peer's FIN (a `Content-Length` body, then the connection closed) trips an assertion in
 * undici 7 that no one can catch and ends the process (nodejs/undici#5360, fixed only in undici 8, which
 * needs Node 22). Chunks go to the caller's sink as they arrive instead.
 */
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { EgressError, egressErrorOf } from './errors.ts';

type Headers = Record<string, string | string[] | undefined>;

export interface EgressRequestOptions {
  method: 'GET' | 'POST' | 'PUT';
  headers?: Record<string, string>;
  body?: string | Buffer | Readable | null;
  /** Hops of a GET's redirects followed (each connects through the policy); 0 (default): a 3xx is the answer. */
  redirects?: number;
  /** The answer's body is read up to this many bytes; a larger one fails with `EGRESS_TOO_LARGE`. */
  maxBodyBytes: number;
  /** The whole exchange, every hop and the body included, ends by then (`EGRESS_UNREACHABLE`). */
  timeoutMs?: number;
  /** Silence this long while waiting for the answer's headers or its next bytes fails it (default 30 s). */
  idleTimeoutMs?: number;
  /** The caller's own end (an attempt cancelled): the request stops and rejects with its reason. */
  signal?: AbortSignal;
  /**
   * Told the final answer's status and headers: returns where its body goes, chunk by chunk (it is not
   * paused for the sink: the sink keeps up or buffers), or null to drop it unread. Without it the body
   * is collected into `body`.
   */
  onResponse?(status: number, headers: Headers): ((chunk: Buffer) => void) | null;
}

export interface EgressResponse {
  status: number;
  headers: Headers;
  /** The body, when collected (no `onResponse` sink); empty otherwise. */
  body: Buffer;
  /** Bytes of the body read. */
  bytes: number;
  /** The URL that answered (after redirects). */
  url: string;
}

const redirectStatuses = new Set([301, 302, 303, 307, 308]);
/** Headers that stay with their origin, as fetch drops them on a redirect elsewhere. */
const originBound = ['authorization', 'cookie', 'proxy-authorization'];

export async function egressRequest(
  dispatcher: Dispatcher,
  url: string,
  options: EgressRequestOptions,
): Promise<EgressResponse> {
  // One controller for both ends (the caller's, the time cap), held here: a timer of our own, as
  // AbortSignal.any over AbortSignal.timeout may be collected before it fires.
  const ending = new AbortController();
  const end = () => ending.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', end, { once: true });
  if (options.signal?.aborted) end();
  const timer = options.timeoutMs
    ? setTimeout(() => ending.abort(new Error('time cap reached')), options.timeoutMs)
    : null;
  try {
    return await follow(dispatcher, url, options, ending.signal);
  } finally {
    if (timer) clearTimeout(timer);
    options.signal?.removeEventListener('abort', end);
  }
}

async function follow(
  dispatcher: Dispatcher,
  url: string,
  options: EgressRequestOptions,
  signal: AbortSignal,
): Promise<EgressResponse> {
  let current = parseTarget(url);
  let headers = { ...options.headers };
  const hops = options.method === 'GET' ? (options.redirects ?? 0) : 0;
  for (let hop = 0; ; hop += 1) {
    let location: string | undefined;
    const answer = await exchange(dispatcher, current, { ...options, headers }, signal, (status, head) => {
      location = singleHeader(head.location);
      if (hops > 0 && redirectStatuses.has(status) && location) return null;
      return options.onResponse ? options.onResponse(status, head) : undefined;
    }).catch((error: unknown) => {
      // The caller's own abort is the caller's; everything else is the policy's words.
      if (options.signal?.aborted) throw options.signal.reason;
      throw egressErrorOf(error) ?? new EgressError('EGRESS_UNREACHABLE', { cause: error });
    });
    if (!(hops > 0 && redirectStatuses.has(answer.status) && location)) return answer;
    if (hop >= hops) throw new EgressError('EGRESS_REDIRECT_REFUSED');
    const next = parseTarget(location, current);
    if (next.origin !== current.origin)
      headers = Object.fromEntries(
        Object.entries(headers).filter(([name]) => !originBound.includes(name.toLowerCase())),
      );
    current = next;
  }
}

function parseTarget(text: string, base?: URL): URL {
  let url: URL;
  try {
    url = new URL(text, base);
  } catch {
    throw new EgressError(base ? 'EGRESS_REDIRECT_REFUSED' : 'EGRESS_UNREACHABLE');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new EgressError(base ? 'EGRESS_REDIRECT_REFUSED' : 'EGRESS_UNREACHABLE');
  return url;
}

const singleHeader = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/** One request and its answer; `sinkOf` says where the body goes (undefined: collect it, null: drop it). */
function exchange(
  dispatcher: Dispatcher,
  url: URL,
  options: EgressRequestOptions,
  signal: AbortSignal,
  sinkOf: (status: number, headers: Headers) => ((chunk: Buffer) => void) | null | undefined,
): Promise<EgressResponse> {
  return new Promise((resolve, reject) => {
    let controller: Dispatcher.DispatchController | null = null;
    let status = 0;
    let headers: Headers = {};
    let sink: ((chunk: Buffer) => void) | undefined;
    const chunks: Buffer[] = [];
    let bytes = 0;
    let settled = false;
    const settle = (error: unknown, dropped = false) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      if (error) {
        controller?.abort(error as Error);
        return reject(error);
      }
      if (dropped) controller?.abort(new Error('answer dropped unread'));
      resolve({
        status,
        headers,
        body: sink ? Buffer.alloc(0) : Buffer.concat(chunks),
        bytes,
        url: url.href,
      });
    };
    const onAbort = () => settle(signal.reason ?? new Error('aborted'));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    const idle = options.idleTimeoutMs ?? 30_000;
    dispatcher.dispatch(
      {
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: options.method,
        headers: options.headers ?? {},
        body: options.body ?? null,
        headersTimeout: idle,
        bodyTimeout: idle,
      },
      {
        onRequestStart(c) {
          controller = c;
          if (settled) c.abort(new Error('aborted'));
        },
        onResponseStart(_c, statusCode, responseHeaders) {
          if (statusCode < 200) return;
          status = statusCode;
          headers = responseHeaders as Headers;
          const target = sinkOf(statusCode, headers);
          if (target === null) return settle(null, true);
          const declared = Number(singleHeader(headers['content-length']));
          if (declared > options.maxBodyBytes) return settle(new EgressError('EGRESS_TOO_LARGE'));
          sink = target;
        },
        onResponseData(_c, chunk) {
          if (settled) return;
          bytes += chunk.length;
          if (bytes > options.maxBodyBytes) return settle(new EgressError('EGRESS_TOO_LARGE'));
          try {
            if (sink) sink(chunk);
            else chunks.push(chunk);
          } catch (error) {
            settle(error);
          }
        },
        onResponseEnd() {
          settle(null);
        },
        onResponseError(_c, error) {
          settle(error);
        },
      },
    );
  });
}
