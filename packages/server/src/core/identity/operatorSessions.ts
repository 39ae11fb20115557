/**
 * The operators' dashboard sessions, kept on the server so that logging out (or an expiry, or the
 * operator being disabled or signed out by an admin) ends them at once. The cookie holds a random id of 256 bits; the store keeps only its SHA-256, so reading the table
 * opens no session. A session ends when its operator logs out, when it has not been used for the idle
 * timeout, or at its absolute expiry, whichever comes first. Its CSRF token is derived from the id with
 * a server key: a page of the same origin reads it once (login, `/me`), another origin never can.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import { tokensEqual } from './apiKeys.ts';
import { bootstrapPrincipal, type OperatorPrincipal, type RoleBinding } from './operatorAccess.ts';

export type SignInMethod = 'password' | 'sso' | 'bootstrap';

export interface OperatorSessionRow {
  /** The session's public id (the audit's); the cookie's secret is another value. */
  id: string;
  idHash: Buffer;
  /** Null: opened with the bootstrap admin token. */
  operatorId: string | null;
  method: SignInMethod;
  createdAt: Date;
  expiresAt: Date;
}

/** A live session with its operator as they are now (roles read on every request). */
export interface LiveSession {
  id: string;
  method: SignInMethod;
  operator: { id: string; displayName: string; email: string; bindings: RoleBinding[] } | null;
}

export interface OperatorSessionStore {
  /** Saves a new session, and deletes the sessions already ended (expired or idle since `idleSince`). */
  open(session: OperatorSessionRow, idleSince: Date): Promise<void>;
  /**
   * Marks the session used at `now` if it is still live (not expired at `now`, used after `idleSince`,
   * its operator active); null when there is no such live session.
   */
  touch(idHash: Buffer, now: Date, idleSince: Date): Promise<LiveSession | null>;
  close(idHash: Buffer): Promise<void>;
}

export interface OperatorSessionPolicy {
  /** A session not used for this long ends. */
  idleTimeoutSeconds: number;
  /** A session ends this long after login, however busy. */
  lifetimeSeconds: number;
}

export interface OperatorSessionDeps {
  store: OperatorSessionStore;
  clock: Clock;
  ids: IdGenerator;
  /** Whether the bootstrap admin token still opens anything (a session it opened included). */
  bootstrapEnabled: boolean;
  policy: OperatorSessionPolicy;
  /** Derives each session's CSRF token (a key of its own, from the keyring). */
  csrfKey: Uint8Array;
}

export interface OpenedSession {
  /** The cookie's value: shown to the browser once, never stored. */
  id: string;
  csrfToken: string;
  expiresAt: Date;
}

const idPattern = /^[A-Za-z0-9_-]{43}$/;

const hashOf = (id: string) => createHash('sha256').update(id).digest();
const idleSince = (deps: OperatorSessionDeps, now: Date) =>
  new Date(now.getTime() - deps.policy.idleTimeoutSeconds * 1000);

export function csrfTokenOf(deps: Pick<OperatorSessionDeps, 'csrfKey'>, sessionId: string): string {
  return createHmac('sha256', deps.csrfKey).update(`dashboard-csrf:${sessionId}`).digest('base64url');
}

export async function openOperatorSession(
  deps: OperatorSessionDeps,
  who: { operatorId: string | null; method: SignInMethod },
): Promise<OpenedSession> {
  const now = deps.clock.now();
  const id = randomBytes(32).toString('base64url');
  const expiresAt = new Date(now.getTime() + deps.policy.lifetimeSeconds * 1000);
  await deps.store.open(
    { id: deps.ids.newId(), idHash: hashOf(id), ...who, createdAt: now, expiresAt },
    idleSince(deps, now),
  );
  return { id, csrfToken: csrfTokenOf(deps, id), expiresAt };
}

/**
 * The principal of the session the cookie names, its idle time started again; null when there is no
 * live session (or it was opened with the bootstrap token, which has since been switched off).
 */
export async function sessionPrincipal(
  deps: OperatorSessionDeps,
  cookie: string,
): Promise<OperatorPrincipal | null> {
  if (!idPattern.test(cookie)) return null;
  const now = deps.clock.now();
  const session = await deps.store.touch(hashOf(cookie), now, idleSince(deps, now));
  if (!session) return null;
  const credential = { kind: 'session' as const, id: session.id };
  if (!session.operator)
    return session.method === 'bootstrap' && deps.bootstrapEnabled
      ? { ...bootstrapPrincipal, credential }
      : null;
  const { operator } = session;
  return {
    operatorId: operator.id,
    displayName: operator.displayName,
    email: operator.email,
    bindings: operator.bindings,
    credential,
  };
}

export async function closeOperatorSession(deps: OperatorSessionDeps, id: string): Promise<void> {
  if (idPattern.test(id)) await deps.store.close(hashOf(id));
}

/** Whether `given` is the CSRF token of session `id` (constant-time). */
export function csrfTokenMatches(
  deps: Pick<OperatorSessionDeps, 'csrfKey'>,
  id: string,
  given: string,
): boolean {
  return tokensEqual(given, csrfTokenOf(deps, id));
}
