/**
 * The operator's dashboard sessions, kept on the server so that logging out (or an expiry) ends them at
 * once. The cookie holds a random id of 256 bits; the store keeps only its SHA-256, so reading the table
 * opens no session. A session ends when its operator logs out, when it has not been used for the idle
 * timeout, or at its absolute expiry, whichever comes first. Its CSRF token is derived from the id with
 * a server key: a page of the same origin reads it once (login, `/me`), another origin never can.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { Clock } from '../shared/ports.ts';
import { tokensEqual } from './apiKeys.ts';

export interface OperatorSessionRow {
  idHash: Buffer;
  createdAt: Date;
  expiresAt: Date;
}

export interface OperatorSessionStore {
  /** Saves a new session, and deletes the sessions already ended (expired or idle since `idleSince`). */
  open(session: OperatorSessionRow, idleSince: Date): Promise<void>;
  /**
   * Marks the session used at `now` if it is still live (not expired at `now`, used after `idleSince`);
   * false when there is no such live session.
   */
  touch(idHash: Buffer, now: Date, idleSince: Date): Promise<boolean>;
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

export async function openOperatorSession(deps: OperatorSessionDeps): Promise<OpenedSession> {
  const now = deps.clock.now();
  const id = randomBytes(32).toString('base64url');
  const expiresAt = new Date(now.getTime() + deps.policy.lifetimeSeconds * 1000);
  await deps.store.open({ idHash: hashOf(id), createdAt: now, expiresAt }, idleSince(deps, now));
  return { id, csrfToken: csrfTokenOf(deps, id), expiresAt };
}

/** Whether `id` names a live session; a live one counts as used now (its idle time starts again). */
export async function useOperatorSession(deps: OperatorSessionDeps, id: string): Promise<boolean> {
  if (!idPattern.test(id)) return false;
  const now = deps.clock.now();
  return deps.store.touch(hashOf(id), now, idleSince(deps, now));
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
