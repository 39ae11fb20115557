import type { CallbackSenderDeps } from '../../../core/callbacks/sendCallbacks.ts';

/** Posts a signed callback with `fetch`; an answer later than `timeoutMs` fails the attempt. */
export function callbackPoster(timeoutMs: number): CallbackSenderDeps['post'] {
  return async (url, body, headers) => {
    // No redirects: a callback goes to the URL the task named, nowhere else.
    const response = await fetch(url, {
      method: 'POST',
      body,
      headers,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    await response.arrayBuffer().catch(() => undefined);
    return { status: response.status };
  };
}
