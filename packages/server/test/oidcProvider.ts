/**
 * A real OpenID provider for tests (the certified `oidc-provider`), in this process on 127.0.0.1: one
 * confidential client (HTTP Basic, PKCE required), the accounts a test defines, and a sign-in page of its
 * own at `/interaction/:uid`: a form with a `login` field (the account's `sub`; no password) and a
 * "Sign in" button, which a browser test fills. Signing in also consents to every scope asked for.
 *
 * `signIn` does the same without a browser: it follows the provider's redirects with a cookie jar of its
 * own, posts the form, and returns the URL the provider sends the browser back to (the redirect URI with
 * `code`, `state` and `iss`). `down()` closes the listener (the provider is unreachable), `failing(true)`
 * answers 503 to everything, `up()` listens again on the same port.
 *
 * Claims: `openid` gives `sub`, `email` gives `email` and `email_verified`, `profile` gives `name` and
 * `groups` — so the default scopes (`openid email profile`) carry the groups. They are in the ID token
 * unless `claimsInIdToken: false`, which leaves them to the userinfo endpoint.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

export interface TestAccount {
  sub: string;
  email?: string;
  name?: string;
  groups?: string[];
}

export interface TestOidcProviderOptions {
  /** Where the client may be sent back (the callback route's URL). */
  redirectUris: string[];
  accounts: TestAccount[];
  clientId?: string;
  clientSecret?: string;
  /** Claims in the ID token (true, the default) or only from userinfo (false). */
  claimsInIdToken?: boolean;
}

export interface TestOidcProvider {
  /** The issuer identifier: `http://127.0.0.1:<port>`. */
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Signs `login` in at the provider from `authorizationUrl`; the URL it sends the browser back to. */
  signIn(authorizationUrl: URL | string, login: string): Promise<URL>;
  /**
   * Replaces the client's redirect URIs (for a server whose address is known only after the provider's,
   * which it needs at start). Sign-ins in flight at the provider are lost.
   */
  redirectTo(redirectUris: string[]): void;
  /** Closes the listener and its connections: the provider is unreachable until `up()`. */
  down(): Promise<void>;
  up(): Promise<void>;
  /** While on, every request is answered 503 (the provider is there but failing). */
  failing(on: boolean): void;
  stop(): Promise<void>;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const loginPage = (uid: string, message = '') => `<!doctype html>
<html><head><title>Test provider: sign in</title></head><body>
<h1>Sign in</h1>${message ? `<p role="alert">${escapeHtml(message)}</p>` : ''}
<form method="post" action="/interaction/${escapeHtml(uid)}">
<label>Login <input name="login" autocomplete="off" autofocus></label>
<button type="submit">Sign in</button>
</form></body></html>`;

async function formOf(request: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

export async function startOidcProvider(options: TestOidcProviderOptions): Promise<TestOidcProvider> {
  const clientId = options.clientId ?? 'tdp-dashboard';
  const clientSecret = options.clientSecret ?? randomBytes(24).toString('base64url');
  const accounts = new Map(options.accounts.map((account) => [account.sub, account]));
  let failing = false;
  let provider: Provider | null = null;
  let handle: ((request: IncomingMessage, response: ServerResponse) => void) | null = null;

  const server = createServer((request, response) => {
    if (failing || !provider || !handle) {
      response.writeHead(503, { 'content-type': 'text/plain' }).end('unavailable');
      return;
    }
    const interaction = /^\/interaction\/([\w-]+)$/.exec(request.url?.split('?')[0] ?? '');
    if (!interaction) return handle(request, response);
    interact(provider, request, response, interaction[1]!).catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(400, { 'content-type': 'text/plain' });
      response.end(`interaction failed: ${(error as Error).message}`);
    });
  });

  /** The provider's sign-in page: the form, then the login and the consent to what was asked. */
  async function interact(
    provider: Provider,
    request: IncomingMessage,
    response: ServerResponse,
    uid: string,
  ) {
    const details = await provider.interactionDetails(request, response);
    if (request.method !== 'POST') {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(loginPage(uid));
      return;
    }
    const login = (await formOf(request)).get('login')?.trim() ?? '';
    if (!accounts.has(login)) {
      response
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end(loginPage(uid, 'no such account'));
      return;
    }
    const grant = new provider.Grant({ accountId: login, clientId: String(details.params.client_id) });
    grant.addOIDCScope(String(details.params.scope ?? 'openid'));
    const grantId = await grant.save();
    await provider.interactionFinished(
      request,
      response,
      { login: { accountId: login }, consent: { grantId } },
      { mergeWithLastSubmission: false },
    );
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const issuer = `http://127.0.0.1:${port}`;
  const signingKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });

  const cookieKeys = [randomBytes(32).toString('hex')];
  let redirectUris = options.redirectUris;
  const build = () =>
    new Provider(issuer, {
      clients: [
        {
          client_id: clientId,
          client_secret: clientSecret,
          redirect_uris: redirectUris,
          grant_types: ['authorization_code'],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
      pkce: { required: () => true },
      features: { devInteractions: { enabled: false } },
      interactions: {
        url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}`,
      },
      claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'groups'] },
      // Off: the scopes' claims go into the ID token too, as many providers do.
      conformIdTokenClaims: options.claimsInIdToken === false,
      findAccount: async (_ctx: unknown, sub: string) => {
        const account = accounts.get(sub);
        if (!account) return undefined;
        return {
          accountId: sub,
          claims: async () => ({
            sub,
            ...(account.email ? { email: account.email, email_verified: true } : {}),
            ...(account.name ? { name: account.name } : {}),
            ...(account.groups ? { groups: account.groups } : {}),
          }),
        };
      },
      jwks: { keys: [{ ...signingKey, alg: 'RS256', use: 'sig', kid: 'test' }] },
      cookies: { keys: cookieKeys },
      // Set, so that the provider does not print a notice for each default it falls back to.
      ttl: {
        AccessToken: 600,
        AuthorizationCode: 60,
        Grant: 600,
        IdToken: 600,
        Interaction: 600,
        Session: 600,
      },
    });
  provider = build();
  handle = provider.callback();

  const down = async () => {
    if (!server.listening) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  };

  return {
    issuer,
    clientId,
    clientSecret,
    signIn: (authorizationUrl, login) => signInThrough(new URL(authorizationUrl), login, redirectUris),
    redirectTo: (uris) => {
      redirectUris = uris;
      provider = build();
      handle = provider.callback();
    },
    down,
    up: async () => {
      if (server.listening) return;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => {
          server.off('error', reject);
          resolve();
        });
      });
    },
    failing: (on) => {
      failing = on;
    },
    stop: down,
  };
}

/**
 * A browser's walk through the provider without a browser: follow the redirects (keeping the provider's
 * cookies), post the sign-in form, stop at the first redirect to one of the client's redirect URIs.
 */
async function signInThrough(start: URL, login: string, redirectUris: string[]): Promise<URL> {
  const jar = new Map<string, string>();
  const backHome = (url: URL) => redirectUris.some((uri) => url.href.startsWith(uri));
  let url = start;
  let init: RequestInit = { method: 'GET' };
  for (let hop = 0; hop < 10; hop += 1) {
    const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
    const response = await fetch(url, {
      ...init,
      redirect: 'manual',
      headers: { ...(init.headers as Record<string, string>), ...(cookie ? { cookie } : {}) },
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      const name = pair!.slice(0, at).trim();
      const value = pair!.slice(at + 1).trim();
      if (value === '' || /expires=Thu, 01 Jan 1970/i.test(line)) jar.delete(name);
      else jar.set(name, value);
    }
    const location = response.headers.get('location');
    if (location) {
      await response.arrayBuffer();
      url = new URL(location, url);
      if (backHome(url)) return url;
      init = { method: 'GET' };
      continue;
    }
    const page = await response.text();
    if (response.status !== 200 || !page.includes('name="login"'))
      throw new Error(`the provider answered ${response.status} at ${url.pathname}: ${page.slice(0, 200)}`);
    if (init.method === 'POST') throw new Error(`the provider refused the login ${login}`);
    init = {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ login }).toString(),
    };
  }
  throw new Error('the provider kept redirecting');
}
