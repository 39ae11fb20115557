/**
 * Operators for tests: accounts made through the admin API with the bootstrap token, personal tokens,
 * and dashboard sessions signed in with a password, as a person would.
 */
import { randomBytes } from 'node:crypto';
import type { Harness } from './harness.ts';

export type Role = 'viewer' | 'operator' | 'admin';
export interface Binding {
  role: Role;
  tenantId?: string | null;
}

export interface TestOperator {
  id: string;
  email: string;
  password: string;
  /** A personal token with the operator's roles. */
  token: string;
}

/** Creates an operator with the roles given, a password, and a personal token. */
export async function createOperator(
  h: Pick<Harness, 'request' | 'adminToken'>,
  roles: Binding[],
  name = `op-${randomBytes(4).toString('hex')}`,
): Promise<TestOperator> {
  const email = `${name}@example.test`;
  const password = `pw-${randomBytes(12).toString('hex')}`;
  const created = await h.request('POST', '/admin/v1/operators', {
    token: h.adminToken,
    body: { email, displayName: name, password, roles },
  });
  if (created.status !== 201) throw new Error(`operator not created: ${JSON.stringify(created.body)}`);
  const issued = await h.request('POST', `/admin/v1/operators/${created.body.id}/tokens`, {
    token: h.adminToken,
    body: { name: 'tests' },
  });
  if (issued.status !== 201) throw new Error(`token not issued: ${JSON.stringify(issued.body)}`);
  return { id: created.body.id, email, password, token: issued.body.token };
}

export interface DashboardSession {
  cookie: string;
  csrfToken: string;
  /** A request with the session's cookie (and, for a change, its CSRF token and this origin). */
  request(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: any; headers: Headers }>;
}

/** Signs in to the dashboard with an email and password. */
export async function signIn(
  h: Pick<Harness, 'url'>,
  credentials: { email: string; password: string } | { token: string },
): Promise<DashboardSession> {
  const response = await fetch(`${h.url}/dashboard/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: h.url },
    body: JSON.stringify(credentials),
  });
  if (response.status !== 200)
    throw new Error(`sign-in refused: ${response.status} ${await response.text()}`);
  const cookie = (response.headers.get('set-cookie') ?? '').split(';')[0]!;
  const { csrfToken } = (await response.json()) as { csrfToken: string };
  return {
    cookie,
    csrfToken,
    request: async (method, path, body) => {
      const answer = await fetch(`${h.url}${path}`, {
        method,
        headers: {
          cookie,
          origin: h.url,
          'x-csrf-token': csrfToken,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await answer.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {}
      return { status: answer.status, body: parsed, headers: answer.headers };
    },
  };
}
