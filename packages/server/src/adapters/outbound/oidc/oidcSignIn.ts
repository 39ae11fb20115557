/**
 * Operator sign-in through an OpenID Connect provider (openid-client): the authorization code flow with
 * PKCE, a state and a nonce. `begin` gives the provider's URL and the values the browser must bring back
 * (kept by the caller in a sealed cookie); `complete` checks the provider's answer against them and
 * returns who signed in, from the ID token's claims (and the userinfo endpoint for groups or email the
 * ID token leaves out).
 *
 * The provider is discovered at each sign-in's start, never at the server's: a provider that is down
 * makes SSO fail with SSO_UNAVAILABLE while the server and its sessions go on, and the next sign-in
 * discovers again.
 * Every failure is an SsoError: SSO_REJECTED (the answer is not one this sign-in may accept: a wrong
 * state, nonce or issuer, a code the provider refuses) or SSO_UNAVAILABLE (the provider could not be
 * reached, or failed). Its message is for people; `reason` says what went wrong, for the log (the
 * library's words and code — never a token or the provider's answer).
 */
import * as client from 'openid-client';
import type { SsoIdentity } from '../../../core/identity/operatorSignIn.ts';
import { AppError } from '../../../core/shared/errors.ts';

export interface OidcSignInSettings {
  /** The issuer identifier; discovery reads `<issuer>/.well-known/openid-configuration`. */
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Where the provider sends the browser back (the callback route), exactly as registered there. */
  redirectUrl: string;
  /** Space-separated; must include `openid`. */
  scopes: string;
  /** The claim whose value names the operator (else `name`). */
  nameClaim: string;
  /** The claim that lists the person's groups (a list of strings, or one string). */
  groupsClaim: string;
}

/** What the browser brings back to the callback: checked against the provider's answer. */
export interface SsoPending {
  state: string;
  nonce: string;
  codeVerifier: string;
}

export class SsoError extends AppError {
  constructor(
    code: 'SSO_REJECTED' | 'SSO_UNAVAILABLE',
    detail: string,
    /** What went wrong, for the log. */
    readonly reason: string,
  ) {
    super(code, detail);
  }
}

const rejected = (reason: string) =>
  new SsoError(
    'SSO_REJECTED',
    'the single sign-on answer could not be accepted; start the sign-in again from the sign-in page',
    reason,
  );
const unavailable = (reason: string) =>
  new SsoError(
    'SSO_UNAVAILABLE',
    'the single sign-on provider could not be reached; try again in a moment, or sign in with a password',
    reason,
  );

/** Plain http is allowed for a provider on this machine only (tests, `tdp dev`); anywhere else, https. */
export const isLoopbackUrl = (url: URL) =>
  url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);

export class OidcSignIn {
  /** The discovered configuration; reset when discovery fails, so the next sign-in tries again. */
  private configuration: Promise<client.Configuration> | null = null;

  constructor(
    private readonly settings: OidcSignInSettings,
    private readonly options: { timeoutSeconds?: number } = {},
  ) {}

  get issuer(): string {
    return this.settings.issuer;
  }

  get redirectUrl(): string {
    return this.settings.redirectUrl;
  }

  /** Starts a sign-in: the provider's authorization URL and the values its answer must match. */
  async begin(): Promise<{ url: URL; pending: SsoPending }> {
    // Afresh at each start: a provider that went down since the last sign-in answers SSO_UNAVAILABLE
    // here, rather than the browser being sent to an address that does not answer.
    this.configuration = null;
    const config = await this.discovered();
    const pending = {
      state: client.randomState(),
      nonce: client.randomNonce(),
      codeVerifier: client.randomPKCECodeVerifier(),
    };
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: this.settings.redirectUrl,
      scope: this.settings.scopes,
      state: pending.state,
      nonce: pending.nonce,
      code_challenge: await client.calculatePKCECodeChallenge(pending.codeVerifier),
      code_challenge_method: 'S256',
    });
    return { url, pending };
  }

  /**
   * Ends a sign-in: `callbackUrl` is the redirect URL with the provider's answer as its query. Checks the
   * state, exchanges the code (with the PKCE verifier), checks the ID token (issuer, audience, nonce).
   */
  async complete(callbackUrl: URL, pending: SsoPending): Promise<SsoIdentity> {
    const config = await this.discovered();
    try {
      const tokens = await client.authorizationCodeGrant(config, callbackUrl, {
        expectedState: pending.state,
        expectedNonce: pending.nonce,
        pkceCodeVerifier: pending.codeVerifier,
        idTokenExpected: true,
      });
      const idClaims = tokens.claims();
      if (!idClaims) throw rejected('the token answer has no ID token');
      let claims: Record<string, unknown> = idClaims;
      const { groupsClaim } = this.settings;
      // Many providers put groups and email in userinfo only (an ID token kept small).
      const missing = claims[groupsClaim] === undefined || claims.email === undefined;
      if (missing && config.serverMetadata().userinfo_endpoint) {
        const info = await client.fetchUserInfo(config, tokens.access_token, idClaims.sub);
        claims = { ...info, ...idClaims };
      }
      return {
        issuer: idClaims.iss,
        subject: idClaims.sub,
        email: claims.email_verified === false ? null : text(claims.email),
        emailVerified: claims.email_verified === true,
        name: text(claims[this.settings.nameClaim]) ?? text(claims.name),
        groups: groupsOf(claims[groupsClaim]),
      };
    } catch (error) {
      throw ssoFailure(error);
    }
  }

  private discovered(): Promise<client.Configuration> {
    this.configuration ??= this.discover().catch((error) => {
      this.configuration = null;
      // Discovery failing is never the person's doing: the provider is down, or set up wrong.
      throw error instanceof SsoError ? error : unavailable(`discovery: ${reasonOf(error)}`);
    });
    return this.configuration;
  }

  private discover(): Promise<client.Configuration> {
    const issuer = new URL(this.settings.issuer);
    return client.discovery(
      issuer,
      this.settings.clientId,
      { client_secret: this.settings.clientSecret },
      // HTTP Basic is the method every provider takes (the OpenID Connect default).
      client.ClientSecretBasic(this.settings.clientSecret),
      {
        timeout: this.options.timeoutSeconds ?? 10,
        ...(isLoopbackUrl(issuer) ? { execute: [client.allowInsecureRequests] } : {}),
      },
    );
  }
}

const text = (value: unknown): string | null =>
  typeof value === 'string' && value.trim() !== '' ? value : null;

/** A groups claim as providers send it: a list of strings, or a single string. */
function groupsOf(value: unknown): string[] {
  if (typeof value === 'string') return value ? [value] : [];
  if (!Array.isArray(value)) return [];
  return [...new Set(value.filter((group): group is string => typeof group === 'string' && group !== ''))];
}

/**
 * The library's own words and codes, and those of the error beneath (which says which check failed):
 * never a token, a claim's value or the provider's answer body, which the errors carry elsewhere.
 */
function reasonOf(error: unknown): string {
  if (!(error instanceof Error)) return 'an unknown failure';
  const code = (error as { code?: unknown }).code;
  const cause = (error as { cause?: unknown }).cause;
  // An OAuth error code the provider answered with (invalid_grant, access_denied): words of the protocol.
  const oauthError = (error as { error?: unknown }).error;
  const said =
    `${error.name}${typeof code === 'string' ? ` ${code}` : ''}: ${error.message}` +
    (typeof oauthError === 'string' ? ` (${oauthError})` : '');
  if (cause instanceof Error && cause.message !== error.message) return `${said}; ${reasonOf(cause)}`;
  const causeCode = (cause as { code?: unknown } | undefined)?.code;
  return typeof causeCode === 'string' ? `${said} (${causeCode})` : said;
}

/** An HTTP status the provider answered with, when the error carries one. */
function statusOf(error: unknown): number | null {
  if (error instanceof client.ResponseBodyError) return error.status;
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Response ? cause.status : null;
}

/** Whether the provider was not reached, took too long, or failed on its side. */
function providerFailed(error: unknown): boolean {
  // fetch (undici) reports a connection refused, reset or a DNS failure as a TypeError "fetch failed".
  if (error instanceof TypeError && error.message === 'fetch failed') return true;
  const code = (error as { code?: unknown }).code;
  if (code === 'OAUTH_TIMEOUT' || code === 'OAUTH_ABORT') return true;
  const status = statusOf(error);
  return status !== null && status >= 500;
}

function ssoFailure(error: unknown): SsoError {
  if (error instanceof SsoError) return error;
  return providerFailed(error) ? unavailable(reasonOf(error)) : rejected(reasonOf(error));
}
