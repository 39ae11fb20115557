/**
 * Personal API tokens, so scripts act as a named operator instead of with the bootstrap token. A token
 * is `tdpo_<id>_<secret>`: the id finds the row, only the secret's SHA-256 is kept (it carries 256
 * random bits, so a fast hash is enough). A token expires, may be revoked, and does at most its own
 * role, never more than its operator's; it stops working at once when its operator is disabled.
 */
import type { OperatorActor, OperatorAuditRecord } from '../facts/records.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import { generateApiKey, keyIsUsable, parseApiKey, secretMatches } from './apiKeys.ts';
import {
  allows,
  cappedBindings,
  highestRole,
  type OperatorPrincipal,
  type OperatorRole,
  roleAtLeast,
} from './operatorAccess.ts';
import { type OperatorRecord, operatorAuditActions } from './operators.ts';

export const operatorTokenPrefix = 'tdpo';

export interface OperatorTokenRecord {
  id: string;
  operatorId: string;
  name: string;
  secretHash: Buffer;
  role: OperatorRole;
  createdAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
}

export interface OperatorTokenStore {
  create(token: OperatorTokenRecord, audit: OperatorAuditRecord): Promise<void>;
  list(operatorId: string): Promise<OperatorTokenRecord[]>;
  /** Revokes one of the operator's tokens, with its audit record; false when it has no such live token. */
  revoke(operatorId: string, tokenId: string, now: Date, audit: OperatorAuditRecord): Promise<boolean>;
  /** The token with its operator, when that operator is ACTIVE. */
  find(tokenId: string): Promise<{ token: OperatorTokenRecord; operator: OperatorRecord } | null>;
}

export interface OperatorTokenDeps {
  tokens: OperatorTokenStore;
  /** The operator a token is for (another's than the caller's needs a platform-wide admin). */
  operator(id: string): Promise<OperatorRecord | null>;
  clock: Clock;
  ids: IdGenerator;
}

/** Whose tokens a request is about: the caller's own (`me`), or another's for a platform admin. */
async function ownerOf(
  deps: OperatorTokenDeps,
  caller: OperatorPrincipal,
  operatorId: string,
): Promise<OperatorRecord> {
  const own = operatorId === 'me' || operatorId === caller.operatorId;
  if (own && caller.operatorId === null)
    throw new AppError('FORBIDDEN', 'the bootstrap admin token names nobody; tokens belong to operators');
  if (!own && !allows(caller, 'admin', 'platform'))
    throw new AppError('FORBIDDEN', "only a platform-wide admin manages another operator's tokens");
  const id = own ? (caller.operatorId as string) : operatorId;
  const operator = await deps.operator(id);
  if (!operator) throw new AppError('OPERATOR_NOT_FOUND', `operator ${id} does not exist`);
  return operator;
}

export async function issueOperatorToken(
  deps: OperatorTokenDeps,
  caller: OperatorPrincipal,
  actor: OperatorActor,
  operatorId: string,
  request: { name: string; role?: OperatorRole; expiresInDays: number },
): Promise<{ record: OperatorTokenRecord; token: string }> {
  const owner = await ownerOf(deps, caller, operatorId);
  // One's own token does no more than the credential asking for it (a viewer token mints no admin
  // token), and a token-made token ends when its maker does; another's, no more than its operator.
  const own = owner.id === caller.operatorId;
  const highest = highestRole(own ? caller : { bindings: owner.roles });
  if (!highest) throw new AppError('FORBIDDEN', 'the operator holds no role a token could carry');
  const role = request.role ?? highest;
  if (!roleAtLeast(highest, role))
    throw new AppError('FORBIDDEN', `a token cannot do more than what asks for it: at most ${highest}`);
  const now = deps.clock.now();
  const asked = new Date(now.getTime() + request.expiresInDays * 86_400_000);
  const makerEnds = own ? caller.credential.expiresAt : undefined;
  const key = generateApiKey(operatorTokenPrefix);
  const record: OperatorTokenRecord = {
    id: key.keyId,
    operatorId: owner.id,
    name: request.name.trim(),
    secretHash: key.secretHash,
    role,
    createdAt: now,
    expiresAt: makerEnds && makerEnds < asked ? makerEnds : asked,
    revokedAt: null,
  };
  await deps.tokens.create(record, {
    id: deps.ids.newId(),
    action: operatorAuditActions.tokenIssued,
    subjectId: owner.id,
    actor,
    reason: `token "${record.name}"`,
    details: { tokenId: record.id, role, expiresAt: record.expiresAt.toISOString() },
    createdAt: now,
  });
  return { record, token: key.plaintext };
}

export async function listOperatorTokens(
  deps: OperatorTokenDeps,
  caller: OperatorPrincipal,
  operatorId: string,
): Promise<OperatorTokenRecord[]> {
  return deps.tokens.list((await ownerOf(deps, caller, operatorId)).id);
}

export async function revokeOperatorToken(
  deps: OperatorTokenDeps,
  caller: OperatorPrincipal,
  actor: OperatorActor,
  operatorId: string,
  tokenId: string,
): Promise<void> {
  const owner = await ownerOf(deps, caller, operatorId);
  const now = deps.clock.now();
  const revoked = await deps.tokens.revoke(owner.id, tokenId, now, {
    id: deps.ids.newId(),
    action: operatorAuditActions.tokenRevoked,
    subjectId: owner.id,
    actor,
    reason: 'token revoked',
    details: { tokenId },
    createdAt: now,
  });
  if (!revoked) throw new AppError('OPERATOR_TOKEN_NOT_FOUND', `operator token ${tokenId} does not exist`);
}

/** The principal of a personal token; null for a token that is malformed, unknown, revoked or expired. */
export async function authenticateOperatorToken(
  deps: Pick<OperatorTokenDeps, 'tokens' | 'clock'>,
  plaintext: string,
): Promise<OperatorPrincipal | null> {
  const parsed = parseApiKey(plaintext, operatorTokenPrefix);
  if (!parsed) return null;
  const found = await deps.tokens.find(parsed.keyId);
  if (!found || !secretMatches(parsed.secret, found.token.secretHash)) return null;
  const { token, operator } = found;
  if (!keyIsUsable(token, deps.clock.now())) return null;
  return {
    operatorId: operator.id,
    displayName: operator.displayName,
    email: operator.email,
    bindings: cappedBindings(operator.roles, token.role),
    credential: { kind: 'token', id: token.id, expiresAt: token.expiresAt },
  };
}
