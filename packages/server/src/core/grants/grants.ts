/**
 * Access grants (source document 000 §5, DESIGN.md §4 step 6). A worker asks for a URL to download an
 * input or upload an output; the grant is bound to the attempt and its current lease version, so a worker
 * whose lease moved on gets nothing. TDP asks the application's resource provider (docs/resource-provider.md)
 * with the application's bearer token, checks the answer, stores it sealed and returns it. The same
 * idempotency key returns the same grant without asking the provider again.
 */
import { createHash } from 'node:crypto';
import type { AccessGrant } from '@tdp/protocol';
import type { AttemptRecord } from '../facts/records.ts';
import { checkOutboundUrl } from '../identity/outboundUrl.ts';
import type { SecretBox } from '../identity/secretBox.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';

export type GrantPurpose = AccessGrant['purpose'];

export interface GrantRequest {
  leaseVersion: number;
  idempotencyKey: string;
  purpose: GrantPurpose;
  /** What to read or overwrite (DOWNLOAD, UPLOAD); for ARTIFACT the provider names the new resource. */
  resourceRef?: string;
  scope?: string;
  artifact?: { relativePath: string; artifactType: string; mediaType: string; maxBytes: number };
}

/** What the provider answered, as checked: the grant without its id and purpose. */
export type GrantAnswer = Omit<AccessGrant, 'grantId' | 'purpose'>;
export type IssuedGrant = AccessGrant;

export interface StoredGrant {
  id: string;
  attemptId: string;
  leaseVersion: number;
  applicationId: string;
  purpose: GrantPurpose;
  resourceRef: string;
  idempotencyKey: string;
  requestHash: string;
  answerSealed: string;
  expiresAt: Date;
  createdAt: Date;
}

export interface GrantStore {
  find(attemptId: string, idempotencyKey: string): Promise<StoredGrant | null>;
  /** False when the (attempt, key) pair was taken meanwhile. */
  insert(grant: StoredGrant): Promise<boolean>;
}

/**
 * What an application's resource provider said: an answer to check, no usable answer now (worth
 * asking again), or a refusal. `detail` completes "the resource provider …" for the error message.
 */
export type ProviderReply =
  | { kind: 'answered'; body: unknown }
  | { kind: 'unavailable'; detail: string }
  | { kind: 'refused'; detail: string };

/** The call to an application's resource provider. */
export interface ResourceProvider {
  request(url: string, token: string | null, body: Record<string, unknown>): Promise<ProviderReply>;
}

export interface GrantDeps {
  grants: GrantStore;
  provider: ResourceProvider;
  secrets: SecretBox;
  clock: Clock;
  ids: IdGenerator;
  allowInsecureUrls: boolean;
  attempt(id: string): Promise<AttemptRecord | null>;
  /** The worker credential that owns a worker session. */
  credentialOfWorker(workerId: string): Promise<string | null>;
  /** The application's resource provider URL and its decrypted token, or null when none is set. */
  providerOf(applicationId: string): Promise<{ url: string; token: string | null } | null>;
}

const sealedField = (grantId: string) => `access_grant:${grantId}:answer`;
/** Grants longer than this are refused: a leaked URL must not outlive the work by much. */
const maxLifetimeMs = 24 * 3_600_000;

export async function requestGrant(
  deps: GrantDeps,
  credentialId: string,
  attemptId: string,
  request: GrantRequest,
): Promise<IssuedGrant> {
  const attempt = await deps.attempt(attemptId);
  const owner = attempt?.workerId ? await deps.credentialOfWorker(attempt.workerId) : null;
  if (!attempt || owner !== credentialId)
    throw new AppError('ATTEMPT_NOT_FOUND', `attempt ${attemptId} is not leased to a worker of this key`);
  if (attempt.revokedAt || attempt.leaseVersion !== request.leaseVersion)
    throw new AppError(
      'STALE_EXECUTION',
      `lease version ${request.leaseVersion} of attempt ${attemptId} is not current; no grant for it`,
    );
  const requestHash = createHash('sha256').update(JSON.stringify(request)).digest('hex');
  const existing = await deps.grants.find(attemptId, request.idempotencyKey);
  if (existing) return replay(deps, existing, requestHash);

  const provider = await deps.providerOf(attempt.applicationId);
  if (!provider)
    throw new AppError('RESOURCE_PROVIDER_NOT_CONFIGURED', 'the application has no resource provider to ask');
  const grantId = deps.ids.newId();
  const now = deps.clock.now();
  const reply = await deps.provider.request(provider.url, provider.token, {
    grantId,
    applicationId: attempt.applicationId,
    taskId: attempt.taskId,
    attemptId,
    purpose: request.purpose,
    resourceRef: request.resourceRef ?? null,
    scope: request.scope ?? null,
    artifact: request.artifact ?? null,
  });
  if (reply.kind === 'unavailable')
    throw new AppError('RESOURCE_PROVIDER_FAILED', `the resource provider ${reply.detail}`);
  if (reply.kind === 'refused')
    throw new AppError('RESOURCE_PROVIDER_REFUSED', `the resource provider ${reply.detail}`);
  const answer = checkAnswer(reply.body, request, now, deps.allowInsecureUrls);
  if (typeof answer === 'string')
    throw new AppError('RESOURCE_PROVIDER_INVALID', `the resource provider's answer ${answer}`);
  const stored: StoredGrant = {
    id: grantId,
    attemptId,
    leaseVersion: attempt.leaseVersion,
    applicationId: attempt.applicationId,
    purpose: request.purpose,
    resourceRef: answer.resourceRef,
    idempotencyKey: request.idempotencyKey,
    requestHash,
    answerSealed: deps.secrets.seal(JSON.stringify(answer), sealedField(grantId)),
    expiresAt: new Date(answer.expiresAt),
    createdAt: now,
  };
  if (!(await deps.grants.insert(stored))) {
    // A concurrent request with the same key won: answer with its grant.
    const winner = await deps.grants.find(attemptId, request.idempotencyKey);
    if (winner) return replay(deps, winner, requestHash);
  }
  return { grantId, purpose: request.purpose, ...answer };
}

function replay(deps: GrantDeps, stored: StoredGrant, requestHash: string): IssuedGrant {
  if (stored.requestHash !== requestHash)
    throw new AppError('IDEMPOTENCY_KEY_REUSED', 'this idempotency key was used for another grant request');
  const answer = JSON.parse(deps.secrets.open(stored.answerSealed, sealedField(stored.id))) as GrantAnswer;
  return { grantId: stored.id, purpose: stored.purpose, ...answer };
}

/** Checks a provider's answer against what was asked; a string says what is wrong with it. */
export function checkAnswer(
  body: unknown,
  request: GrantRequest,
  now: Date,
  allowInsecureUrls: boolean,
): GrantAnswer | string {
  if (!body || typeof body !== 'object') return 'is not a JSON object';
  const b = body as Record<string, unknown>;
  if (typeof b.url !== 'string') return 'has no url';
  const urlProblem = checkOutboundUrl(b.url, allowInsecureUrls);
  if (urlProblem) return `url ${urlProblem}`;
  const method = b.method ?? (request.purpose === 'DOWNLOAD' ? 'GET' : 'PUT');
  const expected = request.purpose === 'DOWNLOAD' ? 'GET' : 'PUT';
  if (method !== expected) return `method must be ${expected} for ${request.purpose}, not ${String(method)}`;
  const headers = b.headers ?? {};
  if (typeof headers !== 'object' || Object.values(headers as object).some((v) => typeof v !== 'string'))
    return 'headers must map names to strings';
  const expiresAt = typeof b.expiresAt === 'string' ? new Date(b.expiresAt) : null;
  if (!expiresAt || Number.isNaN(expiresAt.getTime())) return 'has no valid expiresAt';
  if (expiresAt <= now) return 'expired already';
  if (expiresAt.getTime() - now.getTime() > maxLifetimeMs) return 'expires more than 24 hours from now';
  const asked = request.artifact?.maxBytes ?? null;
  let maxBytes: number | null = null;
  if (b.maxBytes !== undefined && b.maxBytes !== null) {
    if (typeof b.maxBytes !== 'number' || !Number.isInteger(b.maxBytes) || b.maxBytes <= 0)
      return 'maxBytes must be a positive integer';
    maxBytes = b.maxBytes;
  }
  if (request.purpose !== 'DOWNLOAD') {
    if (maxBytes === null) maxBytes = asked;
    if (maxBytes === null) return 'must give maxBytes for an upload';
    if (asked !== null && maxBytes > asked) return `maxBytes ${maxBytes} is more than the ${asked} asked for`;
  }
  const resourceRef = typeof b.resourceRef === 'string' ? b.resourceRef : request.resourceRef;
  if (!resourceRef) return 'names no resourceRef for the new artifact';
  return {
    url: b.url,
    method: expected,
    headers: headers as Record<string, string>,
    expiresAt: expiresAt.toISOString(),
    maxBytes,
    resourceRef,
  };
}
