/**
 * One HTTP call to TDP with a deadline per attempt and retries where repeating is safe:
 * - `read`: GETs and other calls without side effects;
 * - `idempotent`: writes the server deduplicates (an Idempotency-Key, an immutable name + version, a
 *   client key, a set-to-state operation);
 * - `never`: writes that would happen twice (e.g. retrying a task), sent exactly once.
 * Retried: no answer (refused, dropped, timed out) and answers that say so (5xx, 429, `retryable`).
 */
import { errorFromAnswer, TdpApiError, TdpNetworkError } from './errors.ts';

export type RetryMode = 'read' | 'idempotent' | 'never';

export interface TdpClientOptions {
  /** TDP's base URL, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** The application's API key (`tdp_…`). */
  apiKey: string;
  /** Deadline of each attempt, in milliseconds (default 10 000). */
  timeoutMs?: number;
  /** How many times a call that may be repeated is tried again (default 3). */
  retries?: number;
  /** The first pause before a retry (default 200 ms); it doubles each time, with jitter. */
  retryDelayMs?: number;
  /** The longest pause before a retry (default 5 000 ms), also the cap on a server's Retry-After. */
  maxRetryDelayMs?: number;
  /** A `fetch` to use instead of the global one (e.g. with a proxy agent). */
  fetch?: typeof fetch;
}

/** Options of one call. */
export interface CallOptions {
  /** Aborts the call, retries included (e.g. the end of the request your backend is serving). */
  signal?: AbortSignal;
  /** This call's deadline per attempt, instead of the client's `timeoutMs`. */
  timeoutMs?: number;
}

export interface HttpRequest extends CallOptions {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  retry: RetryMode;
}

export interface HttpAnswer {
  status: number;
  headers: Headers;
  body: unknown;
}

export const clientDefaults = { timeoutMs: 10_000, retries: 3, retryDelayMs: 200, maxRetryDelayMs: 5_000 };

export function createTransport(options: TdpClientOptions) {
  const settings = { ...clientDefaults, ...withoutUndefined(options) };
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? fetch;

  async function attempt(request: HttpRequest): Promise<HttpAnswer> {
    const timeout = AbortSignal.timeout(request.timeoutMs ?? settings.timeoutMs);
    const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
    try {
      const response = await doFetch(urlOf(baseUrl, request), {
        method: request.method,
        headers: {
          authorization: `Bearer ${options.apiKey}`,
          accept: 'application/json, application/problem+json',
          ...(request.body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...request.headers,
        },
        ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
        signal,
      });
      const text = await response.text();
      if (!response.ok) throw errorFromAnswer(response.status, response.headers, text);
      return { status: response.status, headers: response.headers, body: parseAnswer(response, text) };
    } catch (error) {
      if (error instanceof TdpApiError) throw error;
      if (request.signal?.aborted) throw request.signal.reason;
      if (timeout.aborted)
        throw new TdpNetworkError(`${request.method} ${request.path} timed out`, true, { cause: error });
      throw new TdpNetworkError(`${request.method} ${request.path} got no answer`, false, { cause: error });
    }
  }

  /** Sends the request, trying again while its mode allows and the failure may pass. */
  async function send(request: HttpRequest): Promise<HttpAnswer> {
    const retries = request.retry === 'never' ? 0 : settings.retries;
    for (let tried = 0; ; tried += 1) {
      try {
        return await attempt(request);
      } catch (error) {
        if (tried >= retries || !mayPass(error)) throw error;
        await pause(delayBefore(tried, error, settings), request.signal);
      }
    }
  }

  return { send };
}

/** A 2xx body: JSON, or nothing; anything else is not TDP answering (a proxy, a wrong baseUrl). */
function parseAnswer(response: Response, text: string): unknown {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    throw errorFromAnswer(response.status, response.headers, text);
  }
}

function mayPass(error: unknown): boolean {
  if (error instanceof TdpNetworkError) return true;
  return error instanceof TdpApiError && (error.retryable || error.status >= 500);
}

/** Exponential backoff with full jitter; a server's Retry-After (seconds) when it is longer. */
function delayBefore(tried: number, error: unknown, settings: typeof clientDefaults): number {
  const backoff = Math.random() * settings.retryDelayMs * 2 ** tried;
  const retryAfter = error instanceof TdpApiError ? (error.retryAfterSeconds ?? 0) * 1000 : 0;
  return Math.min(Math.max(backoff, retryAfter), settings.maxRetryDelayMs);
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener('abort', aborted);
      resolve();
    }
    function aborted() {
      clearTimeout(timer);
      reject(signal!.reason);
    }
    signal?.addEventListener('abort', aborted, { once: true });
  });
}

function urlOf(baseUrl: string, request: HttpRequest): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(request.query ?? {})) {
    if (value !== undefined) query.set(name, String(value));
  }
  return `${baseUrl}${request.path}${query.size > 0 ? `?${query}` : ''}`;
}

function withoutUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
