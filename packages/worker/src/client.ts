/**
 * The worker side of TDP's worker protocol (docs/workers.md) over HTTP. Failures are sorted into what the
 * runtime does about them: `RejectedError` (401/403: the key or session is not accepted — the session
 * ends, or the worker waits for a key that works), `UnavailableError` (network errors, timeouts, 429 and
 * 5xx: try again later) and `RequestError` (any other refusal, and a 5xx whose problem says it is not
 * retryable, such as a resource provider's unusable answer: asking again gets the same answer).
 *
 * Failover: the client knows one or more server URLs (replicas on one database) and talks to one at a
 * time. When that one does not answer (a network error, a timeout, a 5xx), the same request goes at once
 * to the next, which is then used from there on; an open command stream on the old one is closed, so it
 * reopens on the new one. Every request may go to any replica: the session lives in the database, events
 * carry event ids, acknowledgements and heartbeats are idempotent, grants carry an idempotency key.
 */
import type {
  AccessGrant,
  ArtifactGrantRequest,
  CommandAcks,
  ResourceGrantRequest,
  WorkerCommand,
  WorkerEventOutcome,
  WorkerEventsBatchReply,
  WorkerHeartbeat,
  WorkerRegistered,
  WorkerRegistration,
  WorkerRuntimeState,
} from '@tdp/protocol';
import { Pool } from 'undici';
import { sseEvents } from './sse.ts';

export class RejectedError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'RejectedError';
  }
}

export class UnavailableError extends Error {
  /** The server did not answer or failed (not a 429, which is busy): another replica may serve the request. */
  readonly serverDown: boolean;

  constructor(message: string, options: { cause?: unknown; serverDown?: boolean } = {}) {
    super(message, options.cause === undefined ? {} : { cause: options.cause });
    this.name = 'UnavailableError';
    this.serverDown = options.serverDown ?? true;
  }
}

/** Any other refusal (4xx): the request itself is wrong; `problem` is the server's problem+json. */
export class RequestError extends Error {
  constructor(
    readonly status: number,
    readonly problem: { code?: string; detail?: string } | null,
    message: string,
  ) {
    super(message);
    this.name = 'RequestError';
  }
}

export type Grant = AccessGrant;

/** One server the client can talk to. */
interface Endpoint {
  /** The URL as given, without a trailing slash. */
  base: string;
  /** Kept-alive connections to the server: a request costs a fraction of fetch's CPU. */
  pool: Pool;
  /** The base URL's path (a server behind a prefix), put before every request path. */
  prefix: string;
}

/** `"http://a:8080, http://b:8080"` or a list: the servers, in the order they are tried. */
export function serverUrls(urls: string | readonly string[]): string[] {
  const list = (typeof urls === 'string' ? urls.split(',') : [...urls])
    .map((u) => u.trim().replace(/\/$/, ''))
    .filter((u) => u.length > 0);
  if (list.length === 0) throw new Error('at least one TDP server URL is needed');
  for (const url of list) new URL(url);
  return list;
}

export class WorkerClient {
  private readonly endpoints: Endpoint[];
  /** The endpoint in use; moves on when it does not answer. */
  private current = 0;
  /** Open command streams, by the endpoint they are on, so that a move closes them. */
  private readonly streams = new Set<{ index: number; controller: AbortController }>();

  constructor(
    /** One URL, several separated by commas, or a list (replicas of one deployment). */
    baseUrls: string | readonly string[],
    private workerKey: string,
    private readonly timeoutMs = 15_000,
    /**
     * A command stream from which nothing arrives this long (the server sends a keep-alive every 15 s)
     * is taken for a server that stopped answering: it is dropped and opened on the next server.
     */
    private readonly streamSilenceMs = 45_000,
  ) {
    this.endpoints = serverUrls(baseUrls).map((base) => {
      const url = new URL(base);
      return {
        base,
        pool: new Pool(url.origin, { connections: 4 }),
        prefix: url.pathname.replace(/\/$/, ''),
      };
    });
  }

  /**
   * The worker key from now on (a refused key replaced, runtime.ts `setWorkerKey`). An open command
   * stream keeps the key it was opened with until it reconnects.
   */
  setKey(workerKey: string): void {
    this.workerKey = workerKey;
  }

  /** Every server URL it was given (replicas of one deployment). */
  get servers(): string[] {
    return this.endpoints.map((e) => e.base);
  }

  /** The server in use now. */
  get server(): string {
    return this.endpoints[this.current]!.base;
  }

  /** Protected so that a contract test can check every reply against the protocol's schemas. */
  protected async call(
    method: string,
    path: string,
    body?: unknown,
    extraHeaders: Record<string, string> = {},
  ): Promise<unknown> {
    for (let tried = 1; ; tried += 1) {
      const index = this.current;
      try {
        return await this.callOn(this.endpoints[index]!, method, path, body, extraHeaders);
      } catch (error) {
        if (!this.failedOver(error, index, tried)) throw error;
      }
    }
  }

  /**
   * After `error` from endpoint `index` on the `tried`-th endpoint of a request: whether to try the next
   * one (the server is down and another is left to try). The move is made once, by the first to see it.
   */
  private failedOver(error: unknown, index: number, tried: number): boolean {
    if (!(error instanceof UnavailableError) || !error.serverDown || this.endpoints.length === 1)
      return false;
    if (this.current === index) {
      this.current = (index + 1) % this.endpoints.length;
      for (const stream of this.streams) if (stream.index !== this.current) stream.controller.abort();
    }
    return tried < this.endpoints.length;
  }

  private async callOn(
    endpoint: Endpoint,
    method: string,
    path: string,
    body: unknown,
    extraHeaders: Record<string, string>,
  ): Promise<unknown> {
    let status: number;
    let text: string;
    try {
      const response = await endpoint.pool.request({
        method: method as 'GET' | 'POST',
        path: `${endpoint.prefix}${path}`,
        headers: {
          authorization: `Bearer ${this.workerKey}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...extraHeaders,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      status = response.statusCode;
      text = await response.body.text().catch(() => '');
    } catch (error) {
      throw new UnavailableError(`${method} ${path}: ${(error as Error).message}`, { cause: error });
    }
    if (status >= 200 && status < 300) return parseJson(text);
    const problem = problemOf(text);
    if (status === 401 || (status === 403 && refusesTheKey(problem)))
      throw new RejectedError(status, `${method} ${path} answered ${status}: ${text}`);
    if (status === 429) throw new UnavailableError(`${method} ${path} answered 429`, { serverDown: false });
    // TDP answered, and says asking again gets the same answer (a provider's unusable grant): final.
    if (status >= 500 && problem?.retryable !== false)
      throw new UnavailableError(`${method} ${path} answered ${status}`, {
        // A 502 problem of TDP's own is about what is behind it (a resource provider): another replica
        // would ask the same one.
        serverDown: !(status === 502 && problem?.code),
      });
    throw new RequestError(status, problem, `${method} ${path} answered ${status}: ${text}`);
  }

  /** Closes the kept-alive connections (once the runtime has stopped using the client). */
  async close(): Promise<void> {
    await Promise.all(this.endpoints.map((e) => e.pool.close()));
  }

  register(registration: WorkerRegistration): Promise<WorkerRegistered> {
    return this.call('POST', '/v1/workers/register', registration) as Promise<WorkerRegistered>;
  }

  /** `heldAttempts` (what the worker runs or still reports) lets the server fail what it does not know. */
  async heartbeat(
    workerId: string,
    runtimeState: WorkerRuntimeState,
    heldAttempts?: string[],
  ): Promise<void> {
    await this.call('POST', `/v1/workers/${workerId}/heartbeat`, {
      runtimeState,
      ...(heldAttempts ? { heldAttempts } : {}),
    } satisfies WorkerHeartbeat);
  }

  async ack(workerId: string, commandIds: string[]): Promise<void> {
    await this.call('POST', `/v1/workers/${workerId}/commands:ack`, { commandIds } satisfies CommandAcks);
  }

  /**
   * Sends events, and acknowledges `commandAcks` in the same request (and the same commit). The events
   * are the outbox's bodies as recorded (WorkerEvents; the server validates them).
   */
  async sendEvents(
    workerId: string,
    events: Record<string, unknown>[],
    commandAcks: string[] = [],
    traceparent?: string,
  ): Promise<WorkerEventOutcome[]> {
    const answer = (await this.call(
      'POST',
      `/v1/workers/${workerId}/events:batch`,
      { events, ...(commandAcks.length > 0 ? { commandAcks } : {}) },
      traceparent ? { traceparent } : undefined,
    )) as WorkerEventsBatchReply;
    return answer.results;
  }

  /** `sendEvents` as a reporting transport: a 2xx answer means the acknowledgements were written. */
  async report(
    workerId: string,
    events: Record<string, unknown>[],
    commandAcks: string[],
    traceparent?: string,
  ): Promise<{ outcomes: WorkerEventOutcome[]; acked: boolean }> {
    return { outcomes: await this.sendEvents(workerId, events, commandAcks, traceparent), acked: true };
  }

  /** A short-lived URL for the attempt's resource (docs/resource-provider.md); the key makes it idempotent. */
  grant(
    attemptId: string,
    idempotencyKey: string,
    body: ResourceGrantRequest | ArtifactGrantRequest,
  ): Promise<Grant> {
    const path = 'access' in body ? 'grants' : 'artifacts';
    return this.call('POST', `/v1/attempts/${attemptId}/${path}`, body, {
      'idempotency-key': idempotencyKey,
    }) as Promise<Grant>;
  }

  /** A new URL and expiry for a grant the attempt still needs; the renewal has its own idempotency key. */
  renewGrant(
    attemptId: string,
    grantId: string,
    idempotencyKey: string,
    leaseVersion: number,
  ): Promise<Grant> {
    return this.call(
      'POST',
      `/v1/attempts/${attemptId}/grants/${grantId}:renew`,
      { leaseVersion },
      {
        'idempotency-key': idempotencyKey,
      },
    ) as Promise<Grant>;
  }

  /** Attempt heartbeats (the light path): each carries its START_ATTEMPT's execution token. */
  async attemptHeartbeats(items: { executionToken: string; heartbeatSeq: number }[]): Promise<void> {
    // The worker acts on no outcome of a beat (a stopped attempt reaches it as a command), so it asks
    // for the short answer.
    await this.call('POST', '/v1/task-heartbeats:batch', { heartbeats: items, answer: 'exceptions' });
  }

  /**
   * Reads the command stream until it ends or `signal` aborts. Resolves when the server closes it (or
   * the client moved to another server); rejects with UnavailableError or RejectedError when it cannot
   * be opened on any server, or breaks (the server it was on is then left for the next).
   */
  async streamCommands(
    workerId: string,
    lastEventId: string | null,
    signal: AbortSignal,
    onCommand: (command: WorkerCommand) => void,
  ): Promise<void> {
    for (let tried = 1; ; tried += 1) {
      const index = this.current;
      const stream = { index, controller: new AbortController() };
      this.streams.add(stream);
      try {
        await this.streamOn(
          this.endpoints[index]!,
          workerId,
          lastEventId,
          signal,
          stream.controller,
          onCommand,
        );
        return;
      } catch (error) {
        if (signal.aborted || stream.controller.signal.aborted) return;
        if (!this.failedOver(error, index, tried)) throw error;
      } finally {
        this.streams.delete(stream);
      }
    }
  }

  private async streamOn(
    endpoint: Endpoint,
    workerId: string,
    lastEventId: string | null,
    signal: AbortSignal,
    moved: AbortController,
    onCommand: (command: WorkerCommand) => void,
  ): Promise<void> {
    // Silence (no answer to the request, no byte on the stream) for streamSilenceMs ends the stream.
    const silent = new AbortController();
    const watchdog = setTimeout(() => silent.abort(), this.streamSilenceMs);
    const either = AbortSignal.any([signal, moved.signal, silent.signal]);
    const broke = (what: string, error: unknown) =>
      new UnavailableError(
        silent.signal.aborted
          ? `command stream: nothing from the server for ${this.streamSilenceMs} ms`
          : `command stream ${what}: ${(error as Error).message}`,
        { cause: error },
      );
    try {
      let response: Response;
      try {
        response = await fetch(`${endpoint.base}/v1/workers/${workerId}/commands`, {
          headers: {
            authorization: `Bearer ${this.workerKey}`,
            ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
          },
          signal: either,
        });
      } catch (error) {
        throw broke('did not open', error);
      }
      if (response.status === 401 || response.status === 403)
        throw new RejectedError(response.status, `command stream answered ${response.status}`);
      if (!response.ok || !response.body)
        throw new UnavailableError(`command stream answered ${response.status}`, {
          serverDown: response.status !== 429,
        });
      const events = sseEvents(response.body, () => watchdog.refresh());
      for (;;) {
        let next: IteratorResult<{ data: string }>;
        try {
          next = await events.next();
        } catch (error) {
          throw broke('broke', error);
        }
        if (next.done) return;
        // Outside the try: an error of the handler (a local database error) is not a network problem.
        onCommand(JSON.parse(next.value.data) as WorkerCommand);
      }
    } finally {
      clearTimeout(watchdog);
    }
  }
}

/** TDP's problem+json, when the body is one. */
function problemOf(text: string): { code?: string; detail?: string; retryable?: boolean } | null {
  const body = parseJson(text);
  return body && typeof body === 'object' && typeof body.code === 'string' ? body : null;
}

/**
 * A 403 about the worker key itself (the key or session refused), not about what was asked: a refusal
 * with a code of its own (the resource provider refused the grant) is the request's answer.
 */
function refusesTheKey(problem: { code?: string } | null): boolean {
  return !problem || problem.code === 'FORBIDDEN' || problem.code === 'UNAUTHENTICATED';
}

// biome-ignore lint/suspicious/noExplicitAny: the caller states the shape it expects
function parseJson(text: string): any {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}
