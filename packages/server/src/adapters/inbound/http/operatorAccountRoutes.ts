/**
 * Operator accounts and personal tokens, and who the caller is (`/me`). Mounted twice: under the admin
 * API (`/admin/v1`, bearer tokens) and under the dashboard's API (`/dashboard/api`, its session and
 * CSRF token), each with its own gate. Managing accounts needs a platform-wide admin; anyone signed in
 * manages their own tokens.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { type OperatorRole, operatorRoles, type RoleBinding } from '../../../core/identity/operatorAccess.ts';
import {
  createOperator,
  getOperator,
  type OperatorDeps,
  type OperatorRecord,
  type OperatorStatus,
  signOutEverywhere,
  updateOperator,
} from '../../../core/identity/operators.ts';
import {
  issueOperatorToken,
  listOperatorTokens,
  type OperatorTokenDeps,
  type OperatorTokenRecord,
  revokeOperatorToken,
} from '../../../core/identity/operatorTokens.ts';
import { actorOfRequest, type OperatorGate, operatorOf } from './operatorAuth.ts';
import { problemResponses, Uuid } from './schemas.ts';

const Role = Type.Union(operatorRoles.map((r) => Type.Literal(r)));
const Binding = Type.Object(
  { role: Role, tenantId: Type.Optional(Type.Union([Uuid, Type.Null()])) },
  { additionalProperties: false },
);
const Roles = Type.Array(Binding, { maxItems: 100 });
const DisplayName = Type.String({ minLength: 1, maxLength: 200 });
const Password = Type.String({ minLength: 1, maxLength: 1024 });
const Status = Type.Union([Type.Literal('ACTIVE'), Type.Literal('DISABLED')]);

const OperatorView = Type.Object({
  id: Type.String(),
  email: Type.String(),
  displayName: Type.String(),
  status: Status,
  roles: Type.Array(
    Type.Object({
      role: Role,
      tenantId: Type.Union([Type.String(), Type.Null()]),
      source: Type.Union([Type.Literal('manual'), Type.Literal('sso')]),
    }),
  ),
  sso: Type.Boolean({ description: 'Has signed in through single sign-on' }),
  hasPassword: Type.Boolean(),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
});

const TokenView = Type.Object({
  id: Type.String(),
  name: Type.String(),
  role: Role,
  createdAt: Type.String({ format: 'date-time' }),
  expiresAt: Type.String({ format: 'date-time' }),
  revokedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

const IssuedToken = Type.Object({
  ...TokenView.properties,
  token: Type.String({ description: 'Shown once; only its hash is kept.' }),
});

const operatorView = (o: OperatorRecord) => ({
  id: o.id,
  email: o.email,
  displayName: o.displayName,
  status: o.status,
  roles: o.roles,
  sso: o.ssoSubject !== null,
  hasPassword: o.passwordHash !== null,
  createdAt: o.createdAt.toISOString(),
  updatedAt: o.updatedAt.toISOString(),
});

const tokenView = (t: OperatorTokenRecord) => ({
  id: t.id,
  name: t.name,
  role: t.role,
  createdAt: t.createdAt.toISOString(),
  expiresAt: t.expiresAt.toISOString(),
  revokedAt: t.revokedAt?.toISOString() ?? null,
});

const bindings = (roles: { role: OperatorRole; tenantId?: string | null }[]): RoleBinding[] =>
  roles.map((r) => ({ role: r.role, tenantId: r.tenantId ?? null }));

export function registerOperatorAccountRoutes(
  app: FastifyInstance,
  deps: {
    prefix: string;
    gate: OperatorGate;
    accounts: OperatorDeps;
    tokens: OperatorTokenDeps;
    hidden?: boolean;
  },
): void {
  const { prefix, gate } = deps;
  const admins = gate('admin', 'platform');
  const anyone = gate('viewer', 'tenants');
  const doc = (summary: string, rest: Record<string, unknown> = {}) =>
    deps.hidden
      ? { hide: true, ...rest }
      : {
          tags: ['operators'],
          security: [{ adminToken: [] }],
          summary,
          ...rest,
          response: { ...(rest.response as object), ...problemResponses },
        };
  const OperatorId = Type.Object({ id: Uuid });
  const OwnerId = Type.Object({ id: Type.Union([Uuid, Type.Literal('me')]) });

  // The dashboard has a `/me` of its own (with what the page may show).
  if (!deps.hidden)
    app.get(
      `${prefix}/me`,
      {
        onRequest: anyone,
        schema: doc('Who the caller is: the operator, their roles and the credential used', {
          response: {
            200: Type.Object({
              operator: Type.Object({
                id: Type.Union([Type.String(), Type.Null()]),
                displayName: Type.String(),
                email: Type.Union([Type.String(), Type.Null()]),
              }),
              roles: Type.Array(
                Type.Object({ role: Role, tenantId: Type.Union([Type.String(), Type.Null()]) }),
              ),
              credential: Type.Object({ kind: Type.String(), id: Type.Union([Type.String(), Type.Null()]) }),
            }),
          },
        }),
      },
      async (request) => {
        const me = operatorOf(request);
        return {
          operator: { id: me.operatorId, displayName: me.displayName, email: me.email },
          roles: me.bindings,
          credential: me.credential,
        };
      },
    );

  app.post<{ Body: { email: string; displayName: string; password?: string; roles: RoleBinding[] } }>(
    `${prefix}/operators`,
    {
      onRequest: admins,
      schema: doc('Create an operator account (platform admin; audited)', {
        body: Type.Object(
          {
            // An address with a local part and a domain (`dev@localhost` included: no dot required).
            email: Type.String({ pattern: '^[^\\s@]+@[^\\s@]+$', maxLength: 320 }),
            displayName: DisplayName,
            password: Type.Optional(Password),
            roles: Roles,
          },
          { additionalProperties: false },
        ),
        response: { 201: OperatorView },
      }),
    },
    async (request, reply) => {
      const created = await createOperator(deps.accounts, actorOfRequest(request), {
        ...request.body,
        roles: bindings(request.body.roles),
      });
      return reply.code(201).send(operatorView(created));
    },
  );

  app.get(
    `${prefix}/operators`,
    {
      onRequest: admins,
      schema: doc('List operator accounts (platform admin)', {
        response: { 200: Type.Object({ items: Type.Array(OperatorView) }) },
      }),
    },
    async () => ({ items: (await deps.accounts.store.list()).map(operatorView) }),
  );

  app.get<{ Params: { id: string } }>(
    `${prefix}/operators/:id`,
    {
      onRequest: admins,
      schema: doc('Read an operator account (platform admin)', {
        params: OperatorId,
        response: { 200: OperatorView },
      }),
    },
    async (request) => operatorView(await getOperator(deps.accounts, request.params.id)),
  );

  app.patch<{
    Params: { id: string };
    Body: { displayName?: string; password?: string; status?: OperatorStatus; roles?: RoleBinding[] };
  }>(
    `${prefix}/operators/:id`,
    {
      onRequest: admins,
      schema: doc(
        'Change an operator account: name, password, status, roles (platform admin; audited). DISABLED ends their sessions and revokes their tokens at once.',
        {
          params: OperatorId,
          body: Type.Object(
            {
              displayName: Type.Optional(DisplayName),
              password: Type.Optional(Password),
              status: Type.Optional(Status),
              roles: Type.Optional(Roles),
            },
            { additionalProperties: false, minProperties: 1 },
          ),
          response: { 200: OperatorView },
        },
      ),
    },
    async (request) => {
      const { roles, ...rest } = request.body;
      return operatorView(
        await updateOperator(deps.accounts, actorOfRequest(request), request.params.id, {
          ...rest,
          ...(roles ? { roles: bindings(roles) } : {}),
        }),
      );
    },
  );

  app.post<{ Params: { id: string } }>(
    `${prefix}/operators/:id/sign-out`,
    {
      onRequest: admins,
      schema: doc('End every dashboard session of an operator at once (platform admin; audited)', {
        params: OperatorId,
        response: { 200: Type.Object({ sessionsEnded: Type.Integer() }) },
      }),
    },
    async (request) => signOutEverywhere(deps.accounts, actorOfRequest(request), request.params.id),
  );

  app.post<{ Params: { id: string }; Body: { name: string; role?: OperatorRole; expiresInDays?: number } }>(
    `${prefix}/operators/:id/tokens`,
    {
      onRequest: anyone,
      schema: doc(
        "Issue a personal API token (`me`: the caller's own; another's needs a platform admin). The token is shown once.",
        {
          params: OwnerId,
          body: Type.Object(
            {
              name: Type.String({ minLength: 1, maxLength: 200 }),
              role: Type.Optional(Role),
              expiresInDays: Type.Optional(Type.Integer({ minimum: 1, maximum: 365 })),
            },
            { additionalProperties: false },
          ),
          response: { 201: IssuedToken },
        },
      ),
    },
    async (request, reply) => {
      const { record, token } = await issueOperatorToken(
        deps.tokens,
        operatorOf(request),
        actorOfRequest(request),
        request.params.id,
        {
          name: request.body.name,
          expiresInDays: request.body.expiresInDays ?? 90,
          ...(request.body.role ? { role: request.body.role } : {}),
        },
      );
      return reply.code(201).send({ ...tokenView(record), token });
    },
  );

  app.get<{ Params: { id: string } }>(
    `${prefix}/operators/:id/tokens`,
    {
      onRequest: anyone,
      schema: doc("List an operator's personal tokens (never their secrets)", {
        params: OwnerId,
        response: { 200: Type.Object({ items: Type.Array(TokenView) }) },
      }),
    },
    async (request) => ({
      items: (await listOperatorTokens(deps.tokens, operatorOf(request), request.params.id)).map(tokenView),
    }),
  );

  app.delete<{ Params: { id: string; tokenId: string } }>(
    `${prefix}/operators/:id/tokens/:tokenId`,
    {
      onRequest: anyone,
      schema: doc('Revoke a personal token at once (audited)', {
        params: Type.Object({
          id: Type.Union([Uuid, Type.Literal('me')]),
          tokenId: Type.String({ minLength: 1, maxLength: 100 }),
        }),
        response: { 204: Type.Null() },
      }),
    },
    async (request, reply) => {
      await revokeOperatorToken(
        deps.tokens,
        operatorOf(request),
        actorOfRequest(request),
        request.params.id,
        request.params.tokenId,
      );
      return reply.code(204).send();
    },
  );
}
