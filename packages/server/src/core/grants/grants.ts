/**
 * Access grants: file bytes never pass through TDP. A worker asks for a URL to download an
 * input or upload an output; the grant is bound to the attempt and its current lease version, so a worker
 * whose lease moved on gets nothing. TDP asks the application's resource provider (docs/resource-provider.md)
 * with the application's bearer token, checks the answer, stores it sealed and returns it.
 *
 * A grant lasts as long as the work:
 * - the grant row is reserved before the provider is asked, and the provider gets an idempotency key
 *   derived from the attempt and the worker's key (for an output: its relative path), so a request
 *   retried after a crash asks again with the same key and the provider returns the same allocation;
 * - the same worker key returns the stored grant without asking the provider, unless it has expired or
 *   is about to (`grantReplayRenewal`): then it is renewed, a new URL for the same allocation;
 * - a worker renews a grant it still needs with a request of its own (`renewGrant`).
 */
import { createHash } from 'node:crypto';
import { type AccessGrant, type GrantRenewalPolicy, grantRenewalDueAt } from '@tdp/protocol';
import type { AttemptRecord } from '../facts/records.ts';
import type { SecretBox } from '../identity/secretBox.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import { checkAnswer, type GrantAnswer, type ProviderAsk } from './grantAnswer.ts';

export { checkAnswer, type GrantAnswer, type ProviderAsk } from './grantAnswer.ts';

export type GrantPurpose = AccessGrant['purpose'];

export interface GrantRequest extends ProviderAsk {
  leaseVersion: number;
  idempotencyKey: string;
}

export type IssuedGrant = AccessGrant;

/** A grant row: RESERVED before the provider is asked, ISSUED with its (sealed) answer. */
export interface StoredGrant {
  id: string;
  attemptId: string;
  leaseVersion: number;
  applicationId: string;
  purpose: GrantPurpose;
  state: 'RESERVED' | 'ISSUED';
  idempotencyKey: string;
  requestHash: string;
  /** Null only for grants stored before asks were kept (their purpose and resource say what was asked). */
  ask: ProviderAsk | null;
  resourceRef: string | null;
  answerSealed: string | null;
  expiresAt: Date | null;
  issuedAt: Date | null;
  /** The idempotency key of the last renewal request, so that its replay does not renew again. */
  renewalKey: string | null;
  createdAt: Date;
}

/** A provider's answer as stored: sealed, with what the row keeps in the clear. */
export interface IssuedAnswer {
  resourceRef: string;
  answerSealed: string;
  expiresAt: Date;
  issuedAt: Date;
}

export interface GrantStore {
  find(attemptId: string, idempotencyKey: string): Promise<StoredGrant | null>;
  findById(attemptId: string, grantId: string): Promise<StoredGrant | null>;
  /** Writes the reservation; false when the (attempt, key) pair was taken meanwhile. */
  reserve(grant: StoredGrant): Promise<boolean>;
  /** Completes a reservation; false when another request completed it first. */
  issue(grantId: string, answer: IssuedAnswer): Promise<boolean>;
  /** Replaces an issued grant's answer with a renewed one. */
  renew(grantId: string, answer: IssuedAnswer, renewalKey: string | null): Promise<void>;
  /** Removes a reservation the provider refused (it allocated nothing). */
  dropReservation(grantId: string): Promise<void>;
}

/**
 * What an application's resource provider said: an answer to check, no usable answer now (worth
 * asking again), or a refusal. `detail` completes "the resource provider …" for the error message.
 */
export type ProviderReply =
  | { kind: 'answered'; body: unknown }
  | { kind: 'unavailable'; detail: string }
  | { kind: 'refused'; detail: string };

/** The call to an application's resource provider; `idempotencyKey` goes in the `Idempotency-Key` header. */
export interface ResourceProvider {
  request(
    url: string,
    token: string | null,
    body: Record<string, unknown>,
    idempotencyKey: string,
  ): Promise<ProviderReply>;
}

export interface GrantDeps {
  grants: GrantStore;
  provider: ResourceProvider;
  secrets: SecretBox;
  clock: Clock;
  ids: IdGenerator;
  allowInsecureUrls: boolean;
  /** A replayed grant with less than this left is renewed rather than returned as it was. */
  replayRenewal: GrantRenewalPolicy;
  attempt(id: string): Promise<AttemptRecord | null>;
  /** The worker credential that owns a worker session. */
  credentialOfWorker(workerId: string): Promise<string | null>;
  /** The application's resource provider URL and its decrypted token, or null when none is set. */
  providerOf(applicationId: string): Promise<{ url: string; token: string | null } | null>;
}

const sealedField = (grantId: string) => `access_grant:${grantId}:answer`;

/**
 * The idempotency key the provider gets: the same for every ask of one (attempt, worker key) pair — a
 * retry, a renewal — and for no other. Hashed so that it carries nothing of the worker's key.
 */
export function allocationKey(attemptId: string, idempotencyKey: string): string {
  return createHash('sha256').update(`${attemptId}\n${idempotencyKey}`).digest('hex');
}

export async function requestGrant(
  deps: GrantDeps,
  credentialId: string,
  attemptId: string,
  request: GrantRequest,
): Promise<IssuedGrant> {
  const attempt = await currentAttempt(deps, credentialId, attemptId, request.leaseVersion);
  const requestHash = createHash('sha256').update(JSON.stringify(request)).digest('hex');
  let stored = await deps.grants.find(attemptId, request.idempotencyKey);
  if (!stored) {
    const provider = await deps.providerOf(attempt.applicationId);
    if (!provider)
      throw new AppError(
        'RESOURCE_PROVIDER_NOT_CONFIGURED',
        'the application has no resource provider to ask',
      );
    const { leaseVersion: _lease, idempotencyKey: _key, ...ask } = request;
    const reservation: StoredGrant = {
      id: deps.ids.newId(),
      attemptId,
      leaseVersion: attempt.leaseVersion,
      applicationId: attempt.applicationId,
      purpose: request.purpose,
      state: 'RESERVED',
      idempotencyKey: request.idempotencyKey,
      requestHash,
      ask,
      resourceRef: null,
      answerSealed: null,
      expiresAt: null,
      issuedAt: null,
      renewalKey: null,
      createdAt: deps.clock.now(),
    };
    // A concurrent request with the same key may have reserved it first: carry on with its row.
    stored = (await deps.grants.reserve(reservation))
      ? reservation
      : await deps.grants.find(attemptId, request.idempotencyKey);
    if (!stored) throw new Error(`grant reservation of attempt ${attemptId} vanished`);
  }
  if (stored.requestHash !== requestHash)
    throw new AppError('IDEMPOTENCY_KEY_REUSED', 'this idempotency key was used for another grant request');
  if (stored.state === 'RESERVED') return issue(deps, attempt, stored);
  if (renewalDue(deps, stored)) return renew(deps, attempt, stored, stored.renewalKey);
  return opened(deps, stored);
}

/**
 * A new URL and expiry for an issued grant the attempt still needs. `renewalKey` is the renewal request's
 * own idempotency key: its replay answers the renewed grant without asking the provider again.
 */
export async function renewGrant(
  deps: GrantDeps,
  credentialId: string,
  attemptId: string,
  grantId: string,
  request: { leaseVersion: number; renewalKey: string },
): Promise<IssuedGrant> {
  const attempt = await currentAttempt(deps, credentialId, attemptId, request.leaseVersion);
  const stored = await deps.grants.findById(attemptId, grantId);
  if (stored?.state !== 'ISSUED')
    throw new AppError('GRANT_NOT_FOUND', `attempt ${attemptId} has no issued grant ${grantId}`);
  if (stored.renewalKey === request.renewalKey && !renewalDue(deps, stored)) return opened(deps, stored);
  return renew(deps, attempt, stored, request.renewalKey);
}

async function currentAttempt(
  deps: GrantDeps,
  credentialId: string,
  attemptId: string,
  leaseVersion: number,
): Promise<AttemptRecord> {
  const attempt = await deps.attempt(attemptId);
  const owner = attempt?.workerId ? await deps.credentialOfWorker(attempt.workerId) : null;
  if (!attempt || owner !== credentialId)
    throw new AppError('ATTEMPT_NOT_FOUND', `attempt ${attemptId} is not leased to a worker of this key`);
  if (attempt.revokedAt || attempt.leaseVersion !== leaseVersion)
    throw new AppError(
      'STALE_EXECUTION',
      `lease version ${leaseVersion} of attempt ${attemptId} is not current; no grant for it`,
    );
  return attempt;
}

function renewalDue(deps: GrantDeps, stored: StoredGrant): boolean {
  if (!stored.expiresAt || !stored.issuedAt) return true;
  const dueAt = grantRenewalDueAt(stored.issuedAt.getTime(), stored.expiresAt.getTime(), deps.replayRenewal);
  return deps.clock.now().getTime() >= dueAt;
}

/** Completes a reservation: asks the provider (again, after a crash: same key, same allocation). */
async function issue(deps: GrantDeps, attempt: AttemptRecord, stored: StoredGrant): Promise<IssuedGrant> {
  const answer = await askProvider(deps, attempt, stored, 'issue');
  if (!(await deps.grants.issue(stored.id, seal(deps, stored.id, answer)))) {
    // Another request with the same key completed it first: answer with its grant.
    const winner = await deps.grants.find(stored.attemptId, stored.idempotencyKey);
    if (winner?.state === 'ISSUED') return opened(deps, winner);
  }
  return { grantId: stored.id, purpose: stored.purpose, ...answer };
}

async function renew(
  deps: GrantDeps,
  attempt: AttemptRecord,
  stored: StoredGrant,
  renewalKey: string | null,
): Promise<IssuedGrant> {
  const answer = await askProvider(deps, attempt, stored, 'renew');
  await deps.grants.renew(stored.id, seal(deps, stored.id, answer), renewalKey);
  return { grantId: stored.id, purpose: stored.purpose, ...answer };
}

async function askProvider(
  deps: GrantDeps,
  attempt: AttemptRecord,
  stored: StoredGrant,
  why: 'issue' | 'renew',
): Promise<GrantAnswer> {
  const provider = await deps.providerOf(attempt.applicationId);
  if (!provider)
    throw new AppError('RESOURCE_PROVIDER_NOT_CONFIGURED', 'the application has no resource provider to ask');
  // An issued grant's resource is what a renewal asks for again (an output keeps its allocation).
  const ask: ProviderAsk = stored.ask ?? {
    purpose: stored.purpose,
    resourceRef: stored.resourceRef ?? undefined,
  };
  const key = allocationKey(stored.attemptId, stored.idempotencyKey);
  const reply = await deps.provider.request(
    provider.url,
    provider.token,
    {
      grantId: stored.id,
      idempotencyKey: key,
      renewal: why === 'renew',
      applicationId: attempt.applicationId,
      taskId: attempt.taskId,
      attemptId: stored.attemptId,
      purpose: ask.purpose,
      resourceRef: ask.resourceRef ?? null,
      scope: ask.scope ?? null,
      artifact: ask.artifact ?? null,
    },
    key,
  );
  if (reply.kind === 'unavailable')
    throw new AppError('RESOURCE_PROVIDER_FAILED', `the resource provider ${reply.detail}`);
  if (reply.kind === 'refused') {
    // A refusal allocated nothing: the reservation goes, so that nothing waits on it.
    if (stored.state === 'RESERVED') await deps.grants.dropReservation(stored.id);
    throw new AppError('RESOURCE_PROVIDER_REFUSED', `the resource provider ${reply.detail}`);
  }
  const answer = checkAnswer(reply.body, ask, deps.clock.now(), deps.allowInsecureUrls);
  if (typeof answer === 'string')
    throw new AppError('RESOURCE_PROVIDER_INVALID', `the resource provider's answer ${answer}`);
  if (stored.resourceRef !== null && answer.resourceRef !== stored.resourceRef)
    throw new AppError(
      'RESOURCE_PROVIDER_INVALID',
      `the resource provider's answer names ${answer.resourceRef}, not the ${stored.resourceRef} it allocated under the same idempotency key`,
    );
  return answer;
}

function seal(deps: GrantDeps, grantId: string, answer: GrantAnswer): IssuedAnswer {
  return {
    resourceRef: answer.resourceRef,
    answerSealed: deps.secrets.seal(JSON.stringify(answer), sealedField(grantId)),
    expiresAt: new Date(answer.expiresAt),
    issuedAt: deps.clock.now(),
  };
}

function opened(deps: GrantDeps, stored: StoredGrant): IssuedGrant {
  const answer = JSON.parse(
    deps.secrets.open(stored.answerSealed ?? '', sealedField(stored.id)),
  ) as GrantAnswer;
  return { grantId: stored.id, purpose: stored.purpose, ...answer };
}
