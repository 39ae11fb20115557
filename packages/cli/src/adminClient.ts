/**
 * TDP's admin API over HTTP, as `tdp operators` and `tdp dev` call it: one bearer credential, JSON in
 * and out, and a refusal turned into a `ServerProblem` carrying the problem's stable code and detail.
 */
import type { Problem } from '@tdp/protocol';

/** A refusal from the server (application/problem+json), or an answer that was not one of ours. */
export class ServerProblem extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
  ) {
    super(`${code}: ${detail}`);
    this.name = 'ServerProblem';
  }
}

/** The server could not be reached at all (refused, reset, no such host). */
export class ServerUnreachable extends Error {
  constructor(url: string, cause: unknown) {
    const reason = (cause as { cause?: { message?: string } })?.cause?.message ?? (cause as Error).message;
    super(`cannot reach ${url}: ${reason}`);
    this.name = 'ServerUnreachable';
  }
}

export interface AdminClient {
  readonly baseUrl: string;
  /** The answer's JSON body (null when empty); throws `ServerProblem` on any status from 400 up. */
  call<T = unknown>(method: string, path: string, body?: unknown): Promise<T>;
}

export function adminClient(baseUrl: string, token: string): AdminClient {
  const base = baseUrl.replace(/\/+$/, '');
  return {
    baseUrl: base,
    async call<T>(method: string, path: string, body?: unknown): Promise<T> {
      let response: Response;
      try {
        response = await fetch(`${base}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      } catch (error) {
        throw new ServerUnreachable(base, error);
      }
      const text = await response.text();
      let parsed: unknown = null;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        // Not JSON: a proxy's page, say. The status below still tells what happened.
      }
      if (response.status >= 400) throw problemOf(response, parsed);
      return parsed as T;
    },
  };
}

function problemOf(response: Response, body: unknown): ServerProblem {
  const problem = (body ?? {}) as Partial<Problem>;
  if (typeof problem.code === 'string')
    return new ServerProblem(
      response.status,
      problem.code,
      String(problem.detail ?? problem.title ?? response.statusText),
    );
  // Something in front of TDP (or a TDP too old for this route) answered: say which status it was.
  return new ServerProblem(
    response.status,
    `HTTP_${response.status}`,
    response.statusText || 'unexpected answer',
  );
}
