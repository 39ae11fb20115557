import type { ProviderReply, ResourceProvider } from '../../../core/grants/grants.ts';

/**
 * Calls an application's resource provider (docs/resource-provider.md): one POST, no redirects, an answer
 * within `timeoutMs`. No answer, a 5xx or a 429 is worth asking again; any other 4xx is a refusal.
 */
export function httpResourceProvider(timeoutMs: number): ResourceProvider {
  return {
    async request(url, token, body, idempotencyKey): Promise<ProviderReply> {
      let response: Response;
      try {
        response = await fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            // The same key for every ask of one allocation: the provider answers it with the same one.
            'idempotency-key': idempotencyKey,
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
          body: JSON.stringify(body),
          // A grant goes to the URL the application registered, nowhere else.
          redirect: 'manual',
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        return { kind: 'unavailable', detail: `did not answer: ${(error as Error).message}` };
      }
      const text = await response.text().catch(() => '');
      if (response.status >= 500 || response.status === 429)
        return { kind: 'unavailable', detail: `answered ${response.status}` };
      if (response.status >= 400)
        return { kind: 'refused', detail: `refused the grant (${response.status})` };
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
