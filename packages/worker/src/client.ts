/**
 * The worker side of TDP's worker protocol (docs/workers.md) over HTTP. Failures are sorted into what the
 * runtime does about them: `RejectedError` (401/403: the key or session is not accepted — the session
 * ends) and `UnavailableError` (network errors, timeouts, 429 and 5xx: try again later).
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
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UnavailableError';
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

export class WorkerClient {
  /** Kept-alive connections to the server: a request costs a fraction of fetch's CPU. */
  private readonly pool: Pool;
  /** The base URL's path (a server behind a prefix), put before every request path. */
  private readonly prefix: string;

  constructor(
    private readonly baseUrl: string,
    private readonly workerKey: string,
    private readonly timeoutMs = 15_000,
  ) {
    const url = new URL(baseUrl);
    this.pool = new Pool(url.origin, { connections: 4 });
    this.prefix = url.pathname.replace(/\/$/, '');
  }

  /** Protected so that a contract test can check every reply against the protocol's schemas. */
  protected async call(
    method: string,
    path: string,
    body?: unknown,
    extraHeaders: Record<string, string> = {},
  ): Promise<unknown> {
    let status: number;
    let text: string;
    try {
      const response = await this.pool.request({
        method: method as 'GET' | 'POST',
        path: `${this.prefix}${path}`,
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
    if (status === 401 || status === 403)
      throw new RejectedError(status, `${method} ${path} answered ${status}: ${text}`);
    if (status === 429 || status >= 500) throw new UnavailableError(`${method} ${path} answered ${status}`);
    if (status < 200 || status >= 300)
      throw new RequestError(status, parseJson(text), `${method} ${path} answered ${status}: ${text}`);
    return parseJson(text);
  }

  /** Closes the kept-alive connections (once the runtime has stopped using the client). */
  close(): Promise<void> {
    return this.pool.close();
  }

  register(registration: WorkerRegistration): Promise<WorkerRegistered> {
    return this.call('POST', '/v1/workers/register', registration) as Promise<WorkerRegistered>;
  }

  async heartbeat(workerId: string, runtimeState: WorkerRuntimeState): Promise<void> {
    await this.call('POST', `/v1/workers/${workerId}/heartbeat`, { runtimeState } satisfies WorkerHeartbeat);
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
  ): Promise<WorkerEventOutcome[]> {
    const answer = (await this.call('POST', `/v1/workers/${workerId}/events:batch`, {
      events,
      ...(commandAcks.length > 0 ? { commandAcks } : {}),
    })) as WorkerEventsBatchReply;
    return answer.results;
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

  /** Attempt heartbeats (the light path): each carries its START_ATTEMPT's execution token. */
  async attemptHeartbeats(items: { executionToken: string; heartbeatSeq: number }[]): Promise<void> {
    await this.call('POST', '/v1/task-heartbeats:batch', { heartbeats: items });
  }

  /**
   * Reads the command stream until it ends or `signal` aborts. Resolves when the server closes it;
   * rejects with UnavailableError or RejectedError when it cannot be opened or breaks.
   */
  async streamCommands(
    workerId: string,
    lastEventId: string | null,
    signal: AbortSignal,
    onCommand: (command: WorkerCommand) => void,
  ): Promise<void> {
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}/v1/workers/${workerId}/commands`, {
        headers: {
          authorization: `Bearer ${this.workerKey}`,
          ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
        },
        signal,
      });
    } catch (error) {
      if (signal.aborted) return;
      throw new UnavailableError(`command stream: ${(error as Error).message}`, { cause: error });
    }
    if (response.status === 401 || response.status === 403)
      throw new RejectedError(response.status, `command stream answered ${response.status}`);
    if (!response.ok || !response.body)
      throw new UnavailableError(`command stream answered ${response.status}`);
    const events = sseEvents(response.body);
    for (;;) {
      let next: IteratorResult<{ data: string }>;
      try {
        next = await events.next();
      } catch (error) {
        if (signal.aborted) return;
        throw new UnavailableError(`command stream broke: ${(error as Error).message}`, { cause: error });
      }
      if (next.done) return;
      // Outside the try: an error of the handler (a local database error) is not a network problem.
      onCommand(JSON.parse(next.value.data) as WorkerCommand);
    }
  }
}

// biome-ignore lint/suspicious/noExplicitAny: the caller states the shape it expects
function parseJson(text: string): any {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}
