import { type Egress, EgressError, egressRequest } from '@tdp/egress';
import type { ProviderReply, ResourceProvider } from '../../../core/grants/grants.ts';

/** A provider's answer is a small JSON object (docs/resource-provider.md); a larger one is not read. */
const maxAnswerBytes = 256 * 1024;

/**
 * Calls an application's resource provider (docs/resource-provider.md) under the egress policy: one POST,
 * no redirects, an answer within `timeoutMs`. No answer, a 5xx or a 429 is worth asking again; an address
 * the policy refuses and any other 4xx are a refusal.
 */
export function httpResourceProvider(timeoutMs: number, egress: Egress): ResourceProvider {
  return {
    async request(url, token, body, idempotencyKey): Promise<ProviderReply> {
      let status: number;
      let text: string;
      try {
        const answer = await egressRequest(egress.agent, url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            // The same key for every ask of one allocation: the provider answers it with the same one.
            'idempotency-key': idempotencyKey,
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
          body: JSON.stringify(body),
          // A grant goes to the URL the application registered, nowhere else.
          redirects: 0,
          maxBodyBytes: maxAnswerBytes,
          timeoutMs,
        });
        status = answer.status;
        text = answer.body.toString('utf8');
      } catch (error) {
        // The policy's fixed words only: nothing that tells what listens at the address.
        const message = error instanceof EgressError ? `${error.code}: ${error.message}` : 'no HTTP answer';
        if (error instanceof EgressError && !error.retryable)
          return { kind: 'refused', detail: `the provider URL: ${message}` };
        return { kind: 'unavailable', detail: `did not answer: ${message}` };
      }
      if (status >= 500 || status === 429) return { kind: 'unavailable', detail: `answered ${status}` };
      if (status >= 400) return { kind: 'refused', detail: `refused the grant (${status})` };
      let parsed: unknown = null;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        parsed = null;
      }
      return { kind: 'answered', body: parsed };
    },
  };
}
