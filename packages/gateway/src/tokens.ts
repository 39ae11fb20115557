/**
 * Connection and subscription JWTs: HMAC with the gateway's key, or RS256/ES256 (and the other
 * RSA/EC/EdDSA algorithms) by the keys of a JWKS URL.
 */
import {
  createRemoteJWKSet,
  type JWTPayload,
  type JWTVerifyGetKey,
  errors as joseErrors,
  jwtVerify,
} from 'jose';
import type { GatewayOptions } from './options.ts';

export type Claims = JWTPayload & Record<string, unknown>;

const asymmetricAlgorithms = ['RS256', 'RS384', 'RS512', 'ES256', 'ES384', 'ES512', 'PS256', 'EdDSA'];

export class TokenVerifier {
  private readonly secret: Uint8Array;
  private readonly jwks: JWTVerifyGetKey | null;

  constructor(
    private readonly options: Pick<
      GatewayOptions,
      'hmacKey' | 'jwksUrl' | 'now' | 'audience' | 'issuer' | 'requireExpiry' | 'acceptToken'
    >,
  ) {
    this.secret =
      typeof options.hmacKey === 'string' ? new TextEncoder().encode(options.hmacKey) : options.hmacKey;
    this.jwks = options.jwksUrl ? createRemoteJWKSet(new URL(options.jwksUrl)) : null;
  }

  /** The gateway's clock for token expiry (read on every call, so that fake timers reach it). */
  now(): number {
    return (this.options.now ?? Date.now)();
  }

  /**
   * The token's claims; 'expired' for one expired or not yet valid (Centrifugo answers both with 109, so
   * the SDK fetches a new token); null for anything else wrong with it, a wrong audience or issuer too,
   * no `exp` with `requireExpiry`, and a token `acceptToken` refuses.
   */
  async verify(token: string | undefined): Promise<Claims | 'expired' | null> {
    if (!token) return null;
    try {
      const currentDate = new Date(this.now());
      const { payload } = await jwtVerify(
        token,
        async (header, input) => {
          if (header.alg.startsWith('HS')) return this.secret;
          if (!this.jwks) throw new joseErrors.JOSENotSupported('no JWKS is configured');
          return this.jwks(header, input);
        },
        {
          algorithms: ['HS256', 'HS384', 'HS512', ...(this.jwks ? asymmetricAlgorithms : [])],
          currentDate,
          ...(this.options.audience ? { audience: this.options.audience } : {}),
          ...(this.options.issuer ? { issuer: this.options.issuer } : {}),
          ...(this.options.requireExpiry ? { requiredClaims: ['exp'] } : {}),
        },
      );
      if (this.options.acceptToken && !(await this.options.acceptToken(payload))) return null;
      return payload as Claims;
    } catch (error) {
      const notYetValid = error instanceof joseErrors.JWTClaimValidationFailed && error.claim === 'nbf';
      return error instanceof joseErrors.JWTExpired || notYetValid ? 'expired' : null;
    }
  }
}

/** The `expires`/`ttl` fields of a reply to a token with an expiry (none without one). */
export function expiry(claims: JWTPayload, now: number): Record<string, unknown> {
  if (!claims.exp) return {};
  return { expires: true, ttl: Math.max(1, claims.exp - Math.floor(now / 1000)) };
}
