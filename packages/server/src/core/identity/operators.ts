/**
 * Operator accounts (docs/operators.md): created, changed, disabled and signed out by a platform-wide
 * admin, each change audited with who made it. Disabling an operator ends their sessions and revokes
 * their personal tokens in the same transaction, so it takes effect on the next request everywhere.
 */
import type { OperatorActor, OperatorAuditRecord } from '../facts/records.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import type { RoleBinding } from './operatorAccess.ts';
import type { Revocations } from './ports.ts';

export type OperatorStatus = 'ACTIVE' | 'DISABLED';
export type BindingSource = 'manual' | 'sso';

export interface OperatorRecord {
  id: string;
  email: string;
  displayName: string;
  status: OperatorStatus;
  /** An argon2id PHC string; null: SSO only. */
  passwordHash: string | null;
  /** `<issuer> <sub>` of the SSO account, once the operator signed in through SSO. */
  ssoSubject: string | null;
  roles: (RoleBinding & { source: BindingSource })[];
  createdAt: Date;
  updatedAt: Date;
}

export interface OperatorChanges {
  displayName?: string;
  passwordHash?: string;
  status?: OperatorStatus;
  /** Replaces the manual bindings (SSO's stay until the next SSO sign-in). */
  roles?: RoleBinding[];
}

export interface OperatorStore {
  /** 'emailTaken' when another account has the address. */
  create(operator: OperatorRecord, audit: OperatorAuditRecord): Promise<'created' | 'emailTaken'>;
  get(id: string): Promise<OperatorRecord | null>;
  byEmail(email: string): Promise<OperatorRecord | null>;
  bySsoSubject(subject: string): Promise<OperatorRecord | null>;
  list(): Promise<OperatorRecord[]>;
  /**
   * Applies the changes with their audit record; a change to DISABLED also ends every session and
   * revokes every token of the operator. Null when there is no such operator.
   */
  update(
    id: string,
    changes: OperatorChanges,
    audit: OperatorAuditRecord,
    now: Date,
  ): Promise<OperatorRecord | null>;
  /** Ends every session of the operator, with its audit record; how many ended. */
  endSessions(id: string, audit: OperatorAuditRecord): Promise<number>;
  /** Links an SSO account and replaces the bindings that came from SSO groups. */
  signedInThroughSso(id: string, subject: string, roles: RoleBinding[], now: Date): Promise<void>;
}

export interface PasswordHasher {
  hash(password: string): Promise<string>;
  verify(hash: string, password: string): Promise<boolean>;
  /** Takes as long as a verification, for an address with no account (the answer must not tell). */
  verifyNothing(password: string): Promise<void>;
}

export interface OperatorDeps {
  store: OperatorStore;
  passwords: PasswordHasher;
  clock: Clock;
  ids: IdGenerator;
  /** Tenants that exist (a binding to another is refused). */
  tenantExists(tenantId: string): Promise<boolean>;
  /** Tells every replica that an operator's access changed (their live connections end). */
  revocations: Pick<Revocations, 'announce'>;
}

export interface NewOperator {
  email: string;
  displayName: string;
  password?: string;
  roles: RoleBinding[];
}

export const operatorAuditActions = {
  created: 'OPERATOR_CREATED',
  changed: 'OPERATOR_CHANGED',
  signedOut: 'OPERATOR_SIGNED_OUT',
  tokenIssued: 'OPERATOR_TOKEN_ISSUED',
  tokenRevoked: 'OPERATOR_TOKEN_REVOKED',
} as const;

/** Passwords shorter than this are refused (NIST SP 800-63B's floor for a chosen secret). */
export const minimumPasswordLength = 12;

export const normalEmail = (email: string) => email.trim().toLowerCase();

/** What the audit keeps of an account: never its password hash. */
export const auditedOperator = (o: OperatorRecord) => ({
  email: o.email,
  displayName: o.displayName,
  status: o.status,
  roles: o.roles,
  hasPassword: o.passwordHash !== null,
});

function checkPassword(password: string): void {
  if (password.length < minimumPasswordLength || password.length > 1024)
    throw new AppError('VALIDATION_FAILED', `a password has ${minimumPasswordLength} to 1024 characters`, [
      { path: '/password', message: `must have ${minimumPasswordLength} to 1024 characters` },
    ]);
}

async function checkRoles(deps: OperatorDeps, roles: RoleBinding[]): Promise<void> {
  for (const [i, binding] of roles.entries())
    if (binding.tenantId !== null && !(await deps.tenantExists(binding.tenantId)))
      throw new AppError('TENANT_NOT_FOUND', `tenant ${binding.tenantId} does not exist`, [
        { path: `/roles/${i}/tenantId`, message: 'names no tenant' },
      ]);
}

const notFound = (id: string) => new AppError('OPERATOR_NOT_FOUND', `operator ${id} does not exist`);

export async function createOperator(
  deps: OperatorDeps,
  actor: OperatorActor,
  request: NewOperator,
): Promise<OperatorRecord> {
  if (request.password !== undefined) checkPassword(request.password);
  await checkRoles(deps, request.roles);
  const now = deps.clock.now();
  const operator: OperatorRecord = {
    id: deps.ids.newId(),
    email: normalEmail(request.email),
    displayName: request.displayName.trim(),
    status: 'ACTIVE',
    passwordHash: request.password === undefined ? null : await deps.passwords.hash(request.password),
    ssoSubject: null,
    roles: request.roles.map((r) => ({ ...r, source: 'manual' })),
    createdAt: now,
    updatedAt: now,
  };
  const created = await deps.store.create(operator, {
    id: deps.ids.newId(),
    action: operatorAuditActions.created,
    subjectId: operator.id,
    actor,
    reason: 'account created',
    details: {},
    after: auditedOperator(operator),
    createdAt: now,
  });
  if (created === 'emailTaken')
    throw new AppError('OPERATOR_EMAIL_TAKEN', `an operator with the email ${operator.email} exists`);
  return operator;
}

export async function getOperator(deps: Pick<OperatorDeps, 'store'>, id: string): Promise<OperatorRecord> {
  const operator = await deps.store.get(id);
  if (!operator) throw notFound(id);
  return operator;
}

export async function updateOperator(
  deps: OperatorDeps,
  actor: OperatorActor,
  id: string,
  request: { displayName?: string; password?: string; status?: OperatorStatus; roles?: RoleBinding[] },
): Promise<OperatorRecord> {
  const before = await getOperator(deps, id);
  if (request.password !== undefined) checkPassword(request.password);
  if (request.roles) await checkRoles(deps, request.roles);
  // An admin cannot lock themselves out: their own account keeps its status.
  if (request.status === 'DISABLED' && actor.operatorId === id)
    throw new AppError('VALIDATION_FAILED', 'you cannot disable your own account', [
      { path: '/status', message: 'is your own account' },
    ]);
  const changes: OperatorChanges = {
    ...(request.displayName !== undefined ? { displayName: request.displayName.trim() } : {}),
    ...(request.password !== undefined ? { passwordHash: await deps.passwords.hash(request.password) } : {}),
    ...(request.status !== undefined ? { status: request.status } : {}),
    ...(request.roles !== undefined ? { roles: request.roles } : {}),
  };
  const now = deps.clock.now();
  const expected = changed(before, changes, now);
  const after = await deps.store.update(
    id,
    changes,
    {
      id: deps.ids.newId(),
      action: operatorAuditActions.changed,
      subjectId: id,
      actor,
      reason: request.status === 'DISABLED' ? 'account disabled' : 'account changed',
      details: { passwordChanged: request.password !== undefined },
      before: auditedOperator(before),
      after: auditedOperator(expected),
      createdAt: now,
    },
    now,
  );
  if (!after) throw notFound(id);
  // What their open live feed was given may be more than they have now.
  if (changes.status || changes.roles || changes.passwordHash)
    await deps.revocations.announce({ kind: 'operator', operatorId: id });
  return after;
}

/** The account as the changes leave it. */
const changed = (before: OperatorRecord, changes: OperatorChanges, now: Date): OperatorRecord => ({
  ...before,
  ...(changes.displayName !== undefined ? { displayName: changes.displayName } : {}),
  ...(changes.passwordHash !== undefined ? { passwordHash: changes.passwordHash } : {}),
  ...(changes.status !== undefined ? { status: changes.status } : {}),
  ...(changes.roles !== undefined
    ? {
        roles: [
          ...changes.roles.map((r) => ({ ...r, source: 'manual' as const })),
          ...before.roles.filter((r) => r.source === 'sso'),
        ],
      }
    : {}),
  updatedAt: now,
});

/** Ends every session of the operator at once (their tokens stay: revoke those one by one). */
export async function signOutEverywhere(
  deps: OperatorDeps,
  actor: OperatorActor,
  id: string,
): Promise<{ sessionsEnded: number }> {
  await getOperator(deps, id);
  const sessionsEnded = await deps.store.endSessions(id, {
    id: deps.ids.newId(),
    action: operatorAuditActions.signedOut,
    subjectId: id,
    actor,
    reason: 'signed out everywhere',
    details: {},
    createdAt: deps.clock.now(),
  });
  await deps.revocations.announce({ kind: 'operator', operatorId: id });
  return { sessionsEnded };
}
