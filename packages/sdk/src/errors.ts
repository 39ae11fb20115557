/**
 * What a failed call throws. An answer from TDP is a `TdpApiError` carrying the problem's stable `code`
 * (branch on it, never on the message); a call that got no answer at all (refused, dropped, timed out,
 * after its retries) is a `TdpNetworkError`.
 */
import type { ErrorCode, FieldError, Problem, TaskWithExecution } from '@tdp/protocol';

/** The protocol's error codes, plus one for an answer that is not a TDP problem (e.g. a proxy's page). */
export type TdpErrorCode = ErrorCode | 'UNEXPECTED_RESPONSE';

export class TdpApiError extends Error {
  readonly code: TdpErrorCode;
  readonly status: number;
  /** Whether the same request (with the same idempotency key) may succeed later. */
  readonly retryable: boolean;
  readonly detail: string;
  readonly title: string;
  /** Which fields were wrong, for validation failures. */
  readonly errors: FieldError[];
  /** The request path the problem is about, when the server names it. */
  readonly instance: string | undefined;
  /** The server's Retry-After, in seconds (429, 503), when it sent one. */
  readonly retryAfterSeconds: number | undefined;

  constructor(problem: {
    code: TdpErrorCode;
    status: number;
    retryable: boolean;
    detail: string;
    title: string;
    errors?: FieldError[];
    instance?: string;
    retryAfterSeconds?: number;
  }) {
    super(`${problem.code}: ${problem.detail}`);
    this.name = 'TdpApiError';
    this.code = problem.code;
    this.status = problem.status;
    this.retryable = problem.retryable;
    this.detail = problem.detail;
    this.title = problem.title;
    this.errors = problem.errors ?? [];
    this.instance = problem.instance;
    this.retryAfterSeconds = problem.retryAfterSeconds;
  }
}

export class TdpNetworkError extends Error {
  constructor(
    message: string,
    /** True when the attempt ran past its `timeoutMs`. */
    readonly timedOut: boolean,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
    this.name = 'TdpNetworkError';
  }
}

/**
 * `waitForTask` ran past its `timeoutMs` before the task ended. The task goes on: `lastSeen` is how it
 * stood at the last read (null when no read answered in time).
 */
export class TdpWaitTimeoutError extends Error {
  constructor(
    readonly taskId: string,
    readonly timeoutMs: number,
    readonly lastSeen: TaskWithExecution | null,
  ) {
    super(
      `task ${taskId} did not end within ${timeoutMs} ms` +
        (lastSeen ? ` (last seen ${lastSeen.task.lifecycleStatus})` : ''),
    );
    this.name = 'TdpWaitTimeoutError';
  }
}

/** Turns a non-2xx answer into a `TdpApiError`, from its problem body when it has one. */
export function errorFromAnswer(status: number, headers: Headers, text: string): TdpApiError {
  const retryAfter = Number(headers.get('retry-after') ?? Number.NaN);
  const retryAfterSeconds =
    Number.isFinite(retryAfter) && retryAfter >= 0 ? { retryAfterSeconds: retryAfter } : {};
  if (headers.get('content-type')?.includes('json')) {
    try {
      const problem = JSON.parse(text) as Partial<Problem>;
      if (typeof problem.code === 'string') {
        return new TdpApiError({
          code: problem.code,
          status,
          retryable: problem.retryable ?? status >= 500,
          detail: problem.detail ?? '',
          title: problem.title ?? '',
          ...(problem.errors ? { errors: problem.errors } : {}),
          ...(problem.instance ? { instance: problem.instance } : {}),
          ...retryAfterSeconds,
        });
      }
    } catch {
      // Not JSON after all: reported as an unexpected answer below.
    }
  }
  return new TdpApiError({
    code: 'UNEXPECTED_RESPONSE',
    status,
    retryable: status >= 500 || status === 429,
    detail: `the server answered ${status} without a TDP ${status < 400 ? 'JSON body' : 'problem body'}`,
    title: 'Unexpected response',
    ...retryAfterSeconds,
  });
}
