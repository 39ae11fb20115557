/**
 * Single sign-on to the dashboard in Chromium, through a real OpenID provider (the certified
 * `oidc-provider`, in this process: packages/server/test/oidcProvider.ts). The role map gives group
 * `tdp-admins` admin platform-wide and group `acme-support` the operator role on tenant Acme.
 *
 * The dashboard is reached at a public address fixed before the server starts (the provider registers
 * the callback under it and the server sends it as its redirect URL): a TCP relay on 127.0.0.1 to the
 * server, whose own port is known only once it listens — as a reverse proxy stands in front of a
 * deployment. The role map names a tenant, so the tenant is created first by a server without single
 * sign-on, on the same database, as an operator would before setting `TDP_OIDC_ROLE_MAP`.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Browser, Page, Response } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, screenshot } from '../../../test/browser.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { parseSsoRoleMap } from '../../server/src/core/identity/ssoRoles.ts';
import {
  startOidcProvider,
  type TestAccount,
  type TestOidcProvider,
} from '../../server/test/oidcProvider.ts';

/** A TCP relay on 127.0.0.1 whose address is known before the port it relays to. */
async function startRelay() {
  let target = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => socket.destroy());
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    relayTo: (serverUrl: string) => {
      target = Number(new URL(serverUrl).port);
    },
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

const ada: TestAccount = {
  sub: 'ada',
  email: 'ada@example.test',
  name: 'Ada Lovelace',
  groups: ['tdp-admins', 'on-call'],
};
/** In groups the role map does not name. */
const nemo: TestAccount = { sub: 'nemo', email: 'nemo@example.test', name: 'Nemo', groups: ['on-call'] };
const carol: TestAccount = {
  sub: 'carol',
  email: 'carol@example.test',
  name: 'Carol',
  groups: ['tdp-admins'],
};
/** Acme's support: the operator role on Acme only; moved between groups by the last test. */
const dave: TestAccount = { sub: 'dave', email: 'dave@example.test', name: 'Dave', groups: ['acme-support'] };

let seed: Harness;
let h: Harness;
let idp: TestOidcProvider;
let front: Awaited<ReturnType<typeof startRelay>>;
let browser: Browser;
let acme: string;
let callbackUrl: string;
/** Ada's signed-in page (the first test), whose session must outlive the provider going down. */
let adaPage: Page;

beforeAll(async () => {
  seed = await startHarness();
  acme = (await seed.createApplication('acme')).tenantId;
  front = await startRelay();
  callbackUrl = `${front.url}/dashboard/api/sso/callback`;
  idp = await startOidcProvider({ redirectUris: [callbackUrl], accounts: [ada, nemo, carol, dave] });
  h = await startHarness({
    sharedDatabaseUrl: seed.databaseUrl,
    settings: {
      oidcIssuer: idp.issuer,
      oidcClientId: idp.clientId,
      oidcClientSecret: idp.clientSecret,
      oidcRedirectUrl: callbackUrl,
      // The person's name from the provider names the operator (the default names them by email).
      oidcNameClaim: 'name',
      oidcRoleMap: parseSsoRoleMap(
        JSON.stringify({ 'tdp-admins': 'admin', 'acme-support': { role: 'operator', tenants: [acme] } }),
      ),
    },
  });
  front.relayTo(h.url);
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await h?.close();
  await idp?.stop();
  await front?.close();
  await seed?.close();
});

/** A browser context of its own (its own cookies), on the dashboard's sign-in page. */
async function signInPage(): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  await page.goto(`${front.url}/dashboard/`);
  await page.locator('form[data-login="password"]').waitFor();
  return page;
}

/**
 * Clicks "Sign in with single sign-on", signs `who` in on the provider's page, and answers the
 * callback's response (the provider sends the browser back to it).
 */
async function signInThroughProvider(page: Page, who: TestAccount): Promise<Response> {
  await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
  await page.locator('input[name="login"]').fill(who.sub);
  const callback = page.waitForResponse((response) => response.url().startsWith(callbackUrl));
  await page.getByRole('button', { name: 'Sign in' }).click();
  return callback;
}

/** A new browser's single sign-on, to the dashboard with its live feed connected. */
async function signedIn(who: TestAccount): Promise<Page> {
  const page = await signInPage();
  const callback = await signInThroughProvider(page, who);
  expect(callback.status()).toBe(302);
  await page.waitForURL(`${front.url}/dashboard/`);
  await page.locator('.connection[data-state="LIVE"]').waitFor({ timeout: 15_000 });
  return page;
}

/** A problem+json the browser was answered with, and what the page shows of it. */
async function refusalOf(response: Response) {
  expect(response.headers()['content-type']).toContain('application/problem+json');
  return { status: response.status(), body: await response.json() };
}

/** `GET /dashboard/api/me` from the page, with its cookie. */
const meOf = (page: Page): Promise<{ status: number; body: any }> =>
  page.evaluate(async () => {
    const response = await fetch('/dashboard/api/me');
    return { status: response.status, body: await response.json() };
  });

async function operators(): Promise<any[]> {
  const list = await h.request('GET', '/admin/v1/operators', { token: h.adminToken });
  expect(list.status).toBe(200);
  return list.body.items;
}

const operatorWith = async (email: string) => (await operators()).find((o) => o.email === email);

describe('single sign-on to the dashboard', () => {
  it('a person in tdp-admins signs in through the provider, as a new SSO operator with admin platform-wide', {
    timeout: 60_000,
  }, async () => {
    const page = await signInPage();
    await screenshot(page, 'sso-sign-in');
    const callback = await signInThroughProvider(page, ada);
    expect(callback.status()).toBe(302);
    expect(callback.headers().location).toBe('/dashboard/');
    await page.waitForURL(`${front.url}/dashboard/`);
    await page.locator('.connection[data-state="LIVE"]').waitFor({ timeout: 15_000 });
    await expect.poll(() => page.locator('body').textContent()).toContain('Ada Lovelace');

    const me = await meOf(page);
    expect(me.status).toBe(200);
    expect(me.body.operator).toMatchObject({ displayName: 'Ada Lovelace', email: 'ada@example.test' });
    expect(me.body.roles).toEqual([{ role: 'admin', tenantId: null }]);
    expect(me.body.can).toEqual({ act: true, actOnPlatform: true, admin: true, seePlatform: true });
    expect(me.body.sso).toEqual({ enabled: true });

    const account = await operatorWith('ada@example.test');
    expect(account).toMatchObject({
      id: me.body.operator.id,
      displayName: 'Ada Lovelace',
      status: 'ACTIVE',
      sso: true,
      hasPassword: false,
      roles: [{ role: 'admin', tenantId: null, source: 'sso' }],
    });
    adaPage = page;
  });

  it('a person in no mapped group is refused with 403 SSO_NO_ROLE, and no account is made', {
    timeout: 60_000,
  }, async () => {
    const before = await operators();
    const page = await signInPage();
    const refusal = await refusalOf(await signInThroughProvider(page, nemo));
    expect(refusal.status).toBe(403);
    expect(refusal.body.code).toBe('SSO_NO_ROLE');
    // The browser shows the refusal, for people.
    expect(await page.locator('body').textContent()).toContain('none of your groups gives a role');
    expect((await meOf(page)).status).toBe(401);
    expect(await operators()).toEqual(before);
    expect(await operatorWith('nemo@example.test')).toBeUndefined();
  });

  it('with the provider down, sessions go on and a new sign-in answers 502 SSO_UNAVAILABLE; once it is back, sign-in works', {
    timeout: 60_000,
  }, async () => {
    await idp.down();
    try {
      const me = await meOf(adaPage);
      expect(me.status).toBe(200);
      expect(me.body.operator.displayName).toBe('Ada Lovelace');
      // The session still reads the dashboard's data, not just who is signed in.
      expect(await adaPage.evaluate(() => fetch('/dashboard/api/tasks').then((r) => r.status))).toBe(200);

      const page = await signInPage();
      const start = page.waitForResponse((response) => response.url().includes('/dashboard/api/sso/start'));
      await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
      const refusal = await refusalOf(await start);
      expect(refusal.status).toBe(502);
      expect(refusal.body.code).toBe('SSO_UNAVAILABLE');
      expect(await page.locator('body').textContent()).toContain('could not be reached');
    } finally {
      await idp.up();
    }
    const page = await signedIn(ada);
    expect((await meOf(page)).body.operator.displayName).toBe('Ada Lovelace');
  });

  it('a callback whose state was tampered with is refused with 400 SSO_REJECTED, and nothing changes', {
    timeout: 60_000,
  }, async () => {
    const before = await operators();
    const page = await signInPage();
    const start = page.waitForResponse((response) =>
      response.url().startsWith(`${front.url}/dashboard/api/sso/start`),
    );
    await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
    const authorizationUrl = (await start).headers().location!;
    await page.locator('input[name="login"]').waitFor();
    // The provider's answer to this browser's sign-in (the fixture walks its pages as the browser would:
    // Chromium follows the provider's redirect to the callback with no hook to change it), sent back with
    // another state than the one this browser started with.
    const answer = await idp.signIn(authorizationUrl, carol.sub);
    expect(answer.href.startsWith(`${callbackUrl}?`)).toBe(true);
    const tampered = new URL(answer);
    tampered.searchParams.set('state', `${answer.searchParams.get('state')}x`);
    const refusal = await refusalOf((await page.goto(tampered.href))!);
    expect(refusal.status).toBe(400);
    expect(refusal.body.code).toBe('SSO_REJECTED');
    expect((await meOf(page)).status).toBe(401);
    expect(await operators()).toEqual(before);

    // The state was all that was wrong: the provider's answer as it was signs Carol in.
    await page.goto(answer.href);
    await page.waitForURL(`${front.url}/dashboard/`);
    expect((await meOf(page)).body.operator.email).toBe('carol@example.test');
  });

  it('SSO roles are set anew at each sign-in: out of every mapped group, a person is refused and loses the group role; a role an admin gave lets them in', {
    timeout: 90_000,
  }, async () => {
    const first = await signedIn(dave);
    const me = await meOf(first);
    expect(me.body.roles).toEqual([{ role: 'operator', tenantId: acme }]);
    expect(me.body.can).toEqual({ act: true, actOnPlatform: false, admin: false, seePlatform: false });
    const id = me.body.operator.id;

    // Moved out of acme-support at the provider: the next sign-in is refused, and the group's role is gone,
    // from the session still open too.
    dave.groups = [];
    const refused = await signInPage();
    const refusal = await refusalOf(await signInThroughProvider(refused, dave));
    expect(refusal.status).toBe(403);
    expect(refusal.body.code).toBe('SSO_NO_ROLE');
    expect((await operatorWith('dave@example.test')).roles).toEqual([]);
    expect((await meOf(first)).status).toBe(403);

    // An admin gives Dave a role of their own: the next sign-in lets them in with it, and with no group role.
    const patched = await h.request('PATCH', `/admin/v1/operators/${id}`, {
      token: h.adminToken,
      body: { roles: [{ role: 'viewer', tenantId: acme }] },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const again = await meOf(await signedIn(dave));
    expect(again.body.operator.id).toBe(id);
    expect(again.body.roles).toEqual([{ role: 'viewer', tenantId: acme }]);
    expect(again.body.can.act).toBe(false);

    // Back in acme-support: the group's role joins the admin's at the next sign-in.
    dave.groups = ['acme-support'];
    await signedIn(dave);
    const account = await operatorWith('dave@example.test');
    expect(account.roles).toEqual(
      expect.arrayContaining([
        { role: 'viewer', tenantId: acme, source: 'manual' },
        { role: 'operator', tenantId: acme, source: 'sso' },
      ]),
    );
    expect(account.roles).toHaveLength(2);
  });
});
