/**
 * Signing an operator in: with their email and password, or through the organisation's OpenID
 * provider. Either way the answer is a new server-side session (operatorSessions.ts). A wrong password,
 * an unknown address and a disabled account are refused alike, in about the same time, so the answer
 * does not tell which accounts exist.
 */
import { AppError } from '../shared/errors.ts';
import type { RoleBinding } from './operatorAccess.ts';
import { type OpenedSession, type OperatorSessionDeps, openOperatorSession } from './operatorSessions.ts';
import { normalEmail, type OperatorDeps, type OperatorRecord } from './operators.ts';

export interface SignInDeps {
  operators: OperatorDeps;
  sessions: OperatorSessionDeps;
}

/** A person the OpenID provider vouched for. */
export interface SsoIdentity {
  issuer: string;
  /** The provider's stable id of the person (`sub`); unique per issuer. */
  subject: string;
  /** Null when the provider gives none, or says it is not verified. */
  email: string | null;
  /** Whether the provider said the email is verified (`email_verified: true`): only then is an account linked by it. */
  emailVerified: boolean;
  name: string | null;
  groups: string[];
}

/** A set of bindings as one comparable text. */
const roleKeys = (roles: RoleBinding[]) =>
  roles
    .map((r) => `${r.role} ${r.tenantId}`)
    .sort()
    .join(',');

const refused = () =>
  new AppError('UNAUTHENTICATED', 'that email and password do not match an active operator');

export async function signInWithPassword(
  deps: SignInDeps,
  email: string,
  password: string,
): Promise<OpenedSession> {
  const operator = await deps.operators.store.byEmail(normalEmail(email));
  if (!operator?.passwordHash) {
    await deps.operators.passwords.verifyNothing(password);
    throw refused();
  }
  const matches = await deps.operators.passwords.verify(operator.passwordHash, password);
  if (!matches || operator.status !== 'ACTIVE') throw refused();
  // The password was right: saying that the account can do nothing yet tells its owner what to ask for.
  if (operator.roles.length === 0)
    throw new AppError('FORBIDDEN', 'your operator account holds no role yet; ask an admin for one');
  return openOperatorSession(deps.sessions, { operatorId: operator.id, method: 'password' });
}

/**
 * Signs in the operator the provider vouched for: the account linked to that provider's subject, or
 * else the account with that email (linked now), or else a new account. Its SSO roles are set anew
 * from the groups; someone whom no group (and no role an admin gave) lets in is refused.
 */
export async function signInWithSso(
  deps: SignInDeps,
  identity: SsoIdentity,
  ssoRoles: RoleBinding[],
): Promise<OpenedSession> {
  const subject = `${identity.issuer} ${identity.subject}`;
  const email = identity.email ? normalEmail(identity.email) : null;
  let operator: OperatorRecord | null = await deps.operators.store.bySsoSubject(subject);
  if (!operator && email) {
    const sameEmail = await deps.operators.store.byEmail(email);
    // An account is linked by its email only when the provider vouches for the address: an unverified
    // claim must not take over an account an admin made (with its roles).
    if (sameEmail && (!identity.emailVerified || sameEmail.ssoSubject !== null))
      throw new AppError(
        'SSO_REJECTED',
        'an operator account with this email exists and cannot be linked to this sign-in; ask an admin',
      );
    operator = sameEmail;
  }
  if (operator?.status === 'DISABLED')
    throw new AppError('SSO_NO_ROLE', 'your operator account is disabled; ask an admin');
  const manual = operator?.roles.filter((r) => r.source === 'manual') ?? [];
  const now = deps.operators.clock.now();
  if (manual.length === 0 && ssoRoles.length === 0) {
    // Out of every mapped group now: the roles the groups gave go at once (from the sessions and tokens
    // already open too), rather than waiting for a sign-in that will not succeed.
    if (operator?.roles.some((r) => r.source === 'sso')) {
      await deps.operators.store.signedInThroughSso(operator.id, subject, [], now);
      await deps.operators.revocations.announce({ kind: 'operator', operatorId: operator.id });
    }
    throw new AppError('SSO_NO_ROLE', 'none of your groups gives a role in TDP; ask an admin for one');
  }
  if (!operator) {
    if (!email) throw new AppError('SSO_REJECTED', 'the identity provider sent no email for this account');
    operator = {
      id: deps.operators.ids.newId(),
      email,
      displayName: identity.name?.trim() || email,
      status: 'ACTIVE',
      passwordHash: null,
      ssoSubject: subject,
      roles: [],
      createdAt: now,
      updatedAt: now,
    };
    const created = await deps.operators.store.create(operator, {
      id: deps.operators.ids.newId(),
      action: 'OPERATOR_CREATED',
      subjectId: operator.id,
      actor: { operatorId: operator.id, name: operator.displayName, credentialId: null },
      reason: 'first single sign-on',
      details: { issuer: identity.issuer },
      after: { email, displayName: operator.displayName, roles: ssoRoles },
      createdAt: now,
    });
    if (created === 'emailTaken') throw new AppError('SSO_REJECTED', 'sign in again');
  }
  await deps.operators.store.signedInThroughSso(operator.id, subject, ssoRoles, now);
  // Other roles from the groups than last time: the live feeds opened with the old ones end.
  if (roleKeys(operator.roles.filter((r) => r.source === 'sso')) !== roleKeys(ssoRoles))
    await deps.operators.revocations.announce({ kind: 'operator', operatorId: operator.id });
  return openOperatorSession(deps.sessions, { operatorId: operator.id, method: 'sso' });
}
