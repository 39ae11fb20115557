import { jwtVerify, SignJWT } from 'jose';
import type { Keyring } from '../../../core/identity/secretBox.ts';
import type { UserPrincipal, UserTokens } from '../../../core/status/ports.ts';
import { derivedKey } from './executionCredentials.ts';

const audience = 'tdp:user';

/**
 * HS256 tokens for an application's end users (`sub` = user), signed with a derived key. Each carries
 * its expiry (a token without `exp` is refused) and the id of the API key that minted it (`akid`): it
 * works only while that key does.
 */
export class JoseUserTokens implements UserTokens {
  constructor(
    private readonly keyring: Keyring,
    /** Whether the API key is still usable (cached; forgotten at once when it is revoked). */
    private readonly keyActive: (keyId: string) => Promise<boolean>,
  ) {}

  async sign(principal: UserPrincipal, expiresAt: Date): Promise<string> {
    const kid = this.keyring.activeKeyId;
    return new SignJWT({
      app: principal.applicationId,
      ten: principal.tenantId,
      akid: principal.keyId,
      prj: principal.viewer.projects,
      rol: principal.viewer.roles,
      // Only the wider view is written: a token without it shows the application's tasks alone.
      ...(principal.userView === 'TENANT' ? { uv: 'TENANT' } : {}),
    })
      .setProtectedHeader({ alg: 'HS256', kid })
      .setSubject(principal.viewer.userId)
      .setAudience(audience)
      .setExpirationTime(Math.floor(expiresAt.getTime() / 1000))
      .sign(derivedKey(this.keyring, kid, 'user-token'));
  }

  async verify(token: string, now: Date): Promise<UserPrincipal | null> {
    try {
      const { payload } = await jwtVerify(
        token,
        (header) => derivedKey(this.keyring, String(header.kid), 'user-token'),
        {
          audience,
          algorithms: ['HS256'],
          currentDate: now,
          requiredClaims: ['exp', 'sub'],
        },
      );
      if (typeof payload.akid !== 'string' || !(await this.keyActive(payload.akid))) return null;
      return {
        kind: 'user',
        applicationId: String(payload.app),
        tenantId: String(payload.ten),
        keyId: payload.akid,
        viewer: {
          userId: String(payload.sub),
          projects: (payload.prj as string[]) ?? [],
          roles: (payload.rol as string[]) ?? [],
        },
        userView: payload.uv === 'TENANT' ? 'TENANT' : 'APPLICATION',
      };
    } catch {
      return null;
    }
  }
}
