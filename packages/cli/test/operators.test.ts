/**
 * `tdp operators …` as a person runs it: a real `tdp` process against a real server (real PostgreSQL),
 * the password through stdin, the server's refusals printed as `code: detail` with exit 1. And the
 * development admin `tdp dev` makes, on a fresh database and on a restart.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { ensureDevelopmentOperator } from '../src/devOperator.ts';

const root = new URL('../../../', import.meta.url).pathname;

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
}, 60_000);
afterAll(async () => {
  await harness?.close();
});

/** `tdp operators <args>`; the bootstrap admin token unless `env` says otherwise. */
function tdp(args: string[], options: { stdin?: string; env?: Record<string, string> } = {}) {
  const child = spawn(
    process.execPath,
    ['--conditions=@tdp/source', '--import', 'tsx', 'packages/cli/src/main.ts', 'operators', ...args],
    {
      cwd: root,
      env: {
        ...process.env,
        TDP_URL: harness.url,
        TDP_ADMIN_TOKEN: harness.adminToken,
        TDP_OPERATOR_TOKEN: '',
        ...options.env,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
  child.stdin.end(options.stdin ?? '');
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.once('close', (code) => resolve({ code, stdout, stderr })),
  );
}

async function signIn(email: string, password: string) {
  const answer = await harness.request('POST', '/dashboard/api/login', { body: { email, password } });
  return { status: answer.status, cookie: answer.headers.get('set-cookie')?.split(';')[0] ?? null };
}

let counter = 0;
/** A new operator made through the CLI (its --json answer), with `password` when given. */
async function createOperator(role: string, password?: string, extra: string[] = []) {
  counter += 1;
  const email = `person${counter}@example.com`;
  const run = await tdp(
    [
      'create',
      '--email',
      email,
      '--name',
      `Person ${counter}`,
      '--role',
      role,
      ...extra,
      ...(password ? ['--password-stdin'] : []),
      '--json',
    ],
    { stdin: password === undefined ? '' : `${password}\n` },
  );
  expect(run.code, run.stderr).toBe(0);
  const operator = JSON.parse(run.stdout) as { id: string; email: string; hasPassword: boolean };
  expect(operator.email).toBe(email);
  return operator;
}

describe('tdp operators', () => {
  it('creates an operator with its password from stdin; it signs in with it, and the list shows it', {
    timeout: 60_000,
  }, async () => {
    const { tenantId } = await harness.createApplication();
    const password = 'correct horse battery staple';
    const created = await createOperator('operator', password, ['--tenant', tenantId]);
    expect(created).toMatchObject({
      displayName: expect.stringMatching(/^Person \d+$/),
      status: 'ACTIVE',
      hasPassword: true,
      roles: [{ role: 'operator', tenantId, source: 'manual' }],
    });
    // The final newline of the pipe is not part of the password.
    expect((await signIn(created.email, password)).status).toBe(200);
    expect((await signIn(created.email, `${password}\n`)).status).toBe(401);

    const listed = await tdp(['list']);
    expect(listed.code, listed.stderr).toBe(0);
    const line = listed.stdout.split('\n').find((row) => row.startsWith(created.id));
    expect(line).toMatch(
      new RegExp(
        `^${created.id}\\s+${created.email}\\s+Person \\d+\\s+ACTIVE\\s+password\\s+operator@${tenantId}$`,
      ),
    );
    expect(listed.stdout.split('\n')[0]).toMatch(/^ID\s+EMAIL\s+NAME\s+STATUS\s+SIGN-IN\s+ROLES$/);
  });

  it('disables an operator (its sign-in refused, its session ended), enables it again, replaces its roles', {
    timeout: 60_000,
  }, async () => {
    const operator = await createOperator('viewer', 'a long enough password');
    const { cookie } = await signIn(operator.email, 'a long enough password');
    expect(cookie).toBeTruthy();

    const disabled = await tdp(['disable', operator.id]);
    expect(disabled.code, disabled.stderr).toBe(0);
    expect(disabled.stdout).toMatch(/^Status\s+DISABLED$/m);
    expect((await signIn(operator.email, 'a long enough password')).status).toBe(401);
    const me = await harness.request('GET', '/dashboard/api/me', { headers: { cookie: cookie! } });
    expect(me.status).toBe(401);

    const enabled = await tdp(['enable', operator.id, '--json']);
    expect(JSON.parse(enabled.stdout).status).toBe('ACTIVE');
    expect((await signIn(operator.email, 'a long enough password')).status).toBe(200);

    const { tenantId } = await harness.createApplication();
    const roles = await tdp(['roles', operator.id, '--role', 'admin', '--tenant', tenantId, '--json']);
    expect(roles.code, roles.stderr).toBe(0);
    expect(JSON.parse(roles.stdout).roles).toEqual([{ role: 'admin', tenantId, source: 'manual' }]);
  });

  it('signs an operator out of every session', { timeout: 30_000 }, async () => {
    const operator = await createOperator('viewer', 'another long password');
    const sessions = [
      await signIn(operator.email, 'another long password'),
      await signIn(operator.email, 'another long password'),
    ];
    const signedOut = await tdp(['sign-out', operator.id]);
    expect(signedOut.code, signedOut.stderr).toBe(0);
    expect(signedOut.stdout).toBe(`Ended 2 sessions of ${operator.id}.\n`);
    for (const { cookie } of sessions)
      expect(
        (await harness.request('GET', '/dashboard/api/me', { headers: { cookie: cookie! } })).status,
      ).toBe(401);
  });

  it('creates a personal token shown once, lists it as its own, and a revoked token gets 401', {
    timeout: 60_000,
  }, async () => {
    const operator = await createOperator('admin');
    const created = await tdp([
      'token',
      'create',
      '--operator',
      operator.id,
      '--name',
      'ci',
      '--role',
      'viewer',
      '--days',
      '7',
    ]);
    expect(created.code, created.stderr).toBe(0);
    const token = /^Token\s+(tdpo_\S+)$/m.exec(created.stdout)?.[1];
    const tokenId = /^ID\s+(\S+)$/m.exec(created.stdout)?.[1];
    expect(token && tokenId, created.stdout).toBeTruthy();
    expect(created.stdout).toMatch(/^Role\s+viewer$/m);
    expect(created.stdout).toContain('not shown again');

    const me = await harness.request('GET', '/admin/v1/me', { token });
    expect([me.status, me.body?.operator?.id]).toEqual([200, operator.id]);

    // TDP_OPERATOR_TOKEN goes before TDP_ADMIN_TOKEN: "me" is the token's operator.
    const listed = await tdp(['token', 'list'], { env: { TDP_OPERATOR_TOKEN: token! } });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`^${tokenId}\\s+ci\\s+viewer\\s+active\\s`, 'm'));
    expect(listed.stdout).not.toContain(token);

    const revoked = await tdp(['token', 'revoke', '--operator', operator.id, tokenId!]);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect((await harness.request('GET', '/admin/v1/me', { token })).status).toBe(401);
    const after = await tdp(['token', 'list', '--operator', operator.id, '--json']);
    expect(JSON.parse(after.stdout).items).toEqual([
      expect.objectContaining({ id: tokenId, name: 'ci', revokedAt: expect.any(String) }),
    ]);
  });

  it('prints a refusal of the server as "code: detail" and exits 1', { timeout: 60_000 }, async () => {
    const operator = await createOperator('viewer');
    const taken = await tdp(['create', '--email', operator.email, '--name', 'Again']);
    expect(taken.code).toBe(1);
    expect(taken.stderr).toMatch(/^OPERATOR_EMAIL_TAKEN: \S.*\n$/);
    expect(taken.stdout).toBe('');

    const unknown = await tdp(['disable', '00000000-0000-4000-8000-000000000000']);
    expect([unknown.code, unknown.stderr]).toEqual([1, expect.stringMatching(/^OPERATOR_NOT_FOUND: \S/)]);

    const wrongToken = await tdp(['list'], { env: { TDP_OPERATOR_TOKEN: 'tdpo_not_a_real_token' } });
    expect([wrongToken.code, wrongToken.stderr]).toEqual([1, expect.stringMatching(/^UNAUTHENTICATED: \S/)]);
  });

  it('refuses a mistake on the command line before asking the server (exit 2)', async () => {
    const noName = await tdp(['create', '--email', 'someone@example.com']);
    expect([noName.code, noName.stderr]).toEqual([2, expect.stringContaining('--name is required')]);
    const badRole = await tdp(['create', '--email', 'someone@example.com', '--name', 'S', '--role', 'root']);
    expect([badRole.code, badRole.stderr]).toEqual([2, expect.stringContaining('--role must be one of')]);
    const noPassword = await tdp([
      'create',
      '--email',
      'someone@example.com',
      '--name',
      'S',
      '--password-stdin',
    ]);
    expect([noPassword.code, noPassword.stderr]).toEqual([2, expect.stringContaining('empty password')]);
    // None of them reached the server.
    const listed = await tdp(['list', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout).items.map((o: { email: string }) => o.email)).not.toContain(
      'someone@example.com',
    );
  });
});

describe("tdp dev's development admin", () => {
  it('is created once, keeps a remembered password, and gets a new one when none is remembered', {
    timeout: 30_000,
  }, async () => {
    const first = await ensureDevelopmentOperator(harness.url, harness.adminToken, undefined);
    expect(first.email).toBe('dev@localhost');
    expect(first.password).toMatch(/^[\w-]{24}$/);
    expect((await signIn(first.email, first.password)).status).toBe(200);
    const me = await harness.request('GET', '/dashboard/api/me', {
      headers: { cookie: (await signIn(first.email, first.password)).cookie! },
    });
    expect(me.body).toMatchObject({
      operator: { displayName: 'Developer', email: 'dev@localhost' },
      roles: [{ role: 'admin', tenantId: null }],
    });

    // A restart with the password remembered: the same one, still good.
    const again = await ensureDevelopmentOperator(harness.url, harness.adminToken, first.password);
    expect(again.password).toBe(first.password);
    expect((await signIn(again.email, again.password)).status).toBe(200);

    // A restart that lost it: a new password, and the old one no longer signs in.
    const renewed = await ensureDevelopmentOperator(harness.url, harness.adminToken, undefined);
    expect(renewed.password).not.toBe(first.password);
    expect((await signIn(renewed.email, renewed.password)).status).toBe(200);
    expect((await signIn(first.email, first.password)).status).toBe(401);
  });
});
