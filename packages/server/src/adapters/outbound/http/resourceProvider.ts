import type { ResourceProvider } from '../../../core/grants/grants.ts';

/** Calls an application's resource provider (docs/resource-provider.md): one POST, no redirects. */
export const httpResourceProvider: ResourceProvider = {
  async request(url, token, body) {
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(body),
        // A grant goes to the URL the application registered, nowhere else.
        redirect: 'manual',
        signal: AbortSignal.timeout(10_000),
      });
    } catch (error) {
      return { unreachable: (error as Error).message };
    }
    const text = await response.text().catch(() => '');
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    return { status: response.status, body: parsed };
  },
};
