import { type Egress, EgressError, egressRequest } from '@tdp/egress';
import type { CallbackSenderDeps } from '../../../core/callbacks/sendCallbacks.ts';

/**
 * Posts a signed callback (or a notification) under the egress policy: an answer later than `timeoutMs`
 * fails the attempt. What it throws is what the delivery log keeps as `lastError`, so it says only the
 * policy's fixed words: a refused address, a closed port and a port that speaks no HTTP read alike.
 */
export function callbackPoster(timeoutMs: number, egress: Egress): CallbackSenderDeps['post'] {
  return async (url, body, headers) => {
    try {
      const answer = await egressRequest(egress.agent, url, {
        method: 'POST',
        body,
        headers,
        // No redirects: a callback goes to the URL the task named, nowhere else.
        redirects: 0,
        // The receiver's body says nothing we keep: its status is the answer.
        onResponse: () => null,
        maxBodyBytes: 0,
        timeoutMs,
      });
      return { status: answer.status };
    } catch (error) {
      if (error instanceof EgressError)
        throw Object.assign(new Error(`${error.code}: ${error.message}`, { cause: error }), {
          permanent: !error.retryable,
        });
      throw error;
    }
  };
}
