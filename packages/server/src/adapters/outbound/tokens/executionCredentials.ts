import { createHmac, hash, randomBytes } from 'node:crypto';
import { jwtVerify } from 'jose';
import type { Keyring } from '../../../core/identity/secretBox.ts';
import type { ExecutionClaims, ExecutionCredentials } from '../../../core/status/ports.ts';

/** Per-purpose signing keys derived from the secret keyring, so one master secret never signs twice. */
export function derivedKey(keyring: Keyring, keyId: string, purpose: string): Uint8Array {
  const master = keyring.keys.get(keyId);
  if (!master) throw new Error(`unknown key id ${keyId}`);
  return new Uint8Array(createHmac('sha256', master).update(`tdp:${purpose}`).digest());
}

const audience = 'tdp:execution';

const base64url = (text: string) => Buffer.from(text).toString('base64url');

/**
 * Execution tokens are HS256 JWTs signed with a key derived from the active secret key (its id in `kid`),
 * bound to every identity of the execution. Verified tokens are cached until they expire, because the
 * same token arrives with every heartbeat of its execution.
 */
export class JoseExecutionCredentials implements ExecutionCredentials {
  private readonly verified = new Map<string, ExecutionClaims>();

  constructor(
    private readonly keyring: Keyring,
    private readonly maxCached = 50_000,
  ) {}

  /**
   * Signed here with node:crypto rather than jose: jose signs through WebCrypto, a thread-pool round trip
   * per token, and the dispatcher signs one per placed attempt. `verify` (jose) checks the same format.
   */
  async sign(claims: ExecutionClaims): Promise<string> {
    const kid = this.keyring.activeKeyId;
    const header = base64url(JSON.stringify({ alg: 'HS256', kid }));
    const payload = base64url(
      JSON.stringify({
        app: claims.applicationId,
        ten: claims.tenantId,
        wf: claims.workflowId,
        tid: claims.taskId,
        ta: claims.taskAttempt,
        sid: claims.stepId,
        sa: claims.stepAttempt,
        op: claims.operationCode,
        prd: claims.producerId,
        evt: claims.allowedEventTypes,
        sub: claims.executionId,
        aud: audience,
        exp: Math.floor(claims.expiresAt.getTime() / 1000),
      }),
    );
    const signature = createHmac('sha256', derivedKey(this.keyring, kid, 'execution-token'))
      .update(`${header}.${payload}`)
      .digest('base64url');
    return `${header}.${payload}.${signature}`;
  }

  async verify(token: string, now: Date): Promise<ExecutionClaims | null> {
    const cached = this.verified.get(token);
    if (cached) return cached.expiresAt > now ? cached : null;
    try {
      const { payload } = await jwtVerify(
        token,
        (header) => derivedKey(this.keyring, String(header.kid), 'execution-token'),
        { audience, algorithms: ['HS256'], currentDate: now },
      );
      const claims: ExecutionClaims = {
        applicationId: String(payload.app),
        tenantId: String(payload.ten),
        workflowId: String(payload.wf),
        taskId: String(payload.tid),
        taskAttempt: Number(payload.ta),
        stepId: String(payload.sid),
        stepAttempt: Number(payload.sa),
        executionId: String(payload.sub),
        operationCode: String(payload.op),
        producerId: String(payload.prd),
        allowedEventTypes: (payload.evt as string[]) ?? [],
        expiresAt: new Date((payload.exp ?? 0) * 1000),
      };
      if (this.verified.size >= this.maxCached) this.verified.clear();
      this.verified.set(token, claims);
      return claims;
    } catch {
      return null;
    }
  }

  newHandle(): { handle: string; hash: Buffer } {
    // 192 random bits; only the hash is stored.
    const handle = `exh_${randomBytes(24).toString('base64url')}`;
    return { handle, hash: this.hashHandle(handle) };
  }

  hashHandle(handle: string): Buffer {
    return hash('sha256', handle, 'buffer');
  }

  hashHandleHex(handle: string): string {
    return hash('sha256', handle, 'hex');
  }
}
