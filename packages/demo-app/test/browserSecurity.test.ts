/**
 * The demo app and browsers (issue 38, item 5): its page says plainly that visitors have no accounts;
 * the visitor cookie is signed, so a made-up one is a stranger; a change must come from the demo's own
 * page with the visitor's CSRF token — the cross-origin `text/plain` POST that once approved a victim's
 * order is refused, and the order keeps waiting for its owner; and the security headers are on its pages.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedVisitor, visitorCookie } from '../src/visitors.ts';
import { type DemoWorld, startDemoWorld, visitor } from './support.ts';

let world: DemoWorld;
let alice: ReturnType<typeof visitor>;

beforeAll(async () => {
  world = await startDemoWorld();
  alice = visitor(world, 'alice');
}, 180_000);

afterAll(async () => {
  await world?.close();
});

const aliceCookie = () =>
  `${visitorCookie}=${signedVisitor(Buffer.from(world.credentials.visitorKey!, 'base64url'), 'alice')}`;

/** A request another site's page makes the browser send: alice's cookie rides along. */
const fromElsewhere = (path: string, headers: Record<string, string>) =>
  fetch(`${world.demo.url}${path}`, {
    method: 'POST',
    headers: { cookie: aliceCookie(), 'content-type': 'text/plain', ...headers },
    body: '{}',
  });

describe('the demo page', () => {
  it('says its visitors have no accounts, signs their cookie and carries the security headers', async () => {
    const page = await fetch(world.demo.url);
    const html = await page.text();
    expect(html).toMatch(/This demo has no accounts/);
    const cookie = page.headers.get('set-cookie')!;
    expect(cookie).toMatch(
      new RegExp(
        `^${visitorCookie}=visitor-[0-9a-f]{12}\\.[A-Za-z0-9_-]{43}; Path=/; HttpOnly; SameSite=Lax`,
      ),
    );
    // The page carries its visitor's CSRF token for its scripts.
    expect(html).toMatch(/<meta name="csrf-token" content="[A-Za-z0-9_-]{43}">/);
    for (const path of ['/', '/app.js', '/api/orders', '/no/such/page']) {
      const response = await fetch(`${world.demo.url}${path}`);
      const csp = response.headers.get('content-security-policy') ?? '';
      expect(csp, path).toContain("frame-ancestors 'none'");
      expect(csp, path).toMatch(/script-src 'self'(;|$)/);
      expect(csp, path).not.toContain('unsafe-inline');
      expect(response.headers.get('x-content-type-options'), path).toBe('nosniff');
      expect(response.headers.get('referrer-policy'), path).toBe('no-referrer');
    }
  });

  it('a made-up visitor cookie is a new visitor, who sees nothing of the one it names', async () => {
    const asset = await alice.upload('holiday-photos.zip', world.samples.photos);
    expect(asset.status).toBe(201);
    const forged = await fetch(`${world.demo.url}/api/assets/${asset.body.id}`, {
      headers: { cookie: `${visitorCookie}=alice` },
    });
    expect(forged.status).toBe(404);
    expect(forged.headers.get('set-cookie')).toMatch(new RegExp(`^${visitorCookie}=visitor-`));
    expect((await alice.call('GET', `/api/assets/${asset.body.id}`)).status).toBe(200);
  });
});

describe('CSRF on the demo app', () => {
  it('refuses the cross-origin text/plain POST that approved an order; the owner can still decide', {
    timeout: 120_000,
  }, async () => {
    const upload = await alice.upload('holiday-photos.zip', world.samples.photos);
    const order = await alice.order(randomUUID(), {
      name: 'Approve me',
      sourceAssetId: upload.body.id,
      processingMode: 'ARCHIVE_CLEAN_ONLY',
      approveBeforePublish: true,
    });
    expect(order.status).toBe(201);
    const id = order.body.id as string;
    await expect
      .poll(async () => (await alice.call('GET', `/api/orders/${id}/approval`)).body.businessStatus, {
        timeout: 60_000,
        interval: 200,
      })
      .toBe('WAITING_USER_ACTION');

    const page = await fetch(world.demo.url, { headers: { cookie: aliceCookie() } });
    const token = /<meta name="csrf-token" content="([^"]+)">/.exec(await page.text())![1]!;
    const attempts: Record<string, string>[] = [
      // The attack as found: another origin, text/plain, the cookie riding along, no token.
      { origin: 'https://evil.example' },
      { 'sec-fetch-site': 'cross-site' },
      // Even with the token, from another origin or site.
      { origin: 'https://evil.example', 'x-csrf-token': token },
      { 'sec-fetch-site': 'same-site', 'x-csrf-token': token },
      // From its own origin but without the token (or with a made-up one).
      { origin: world.demo.url },
      { origin: world.demo.url, 'x-csrf-token': 'A'.repeat(43) },
    ];
    for (const headers of attempts)
      for (const path of [
        '/api/orders/ID/approve',
        '/api/orders/ID/reject',
        '/api/orders/ID/cancel',
        '/%61pi/orders/ID/approve',
      ]) {
        const action = path.replace('ID', id);
        const refused = await fromElsewhere(action, headers);
        expect(
          [
            refused.status,
            refused.headers.get('content-type'),
            ((await refused.json()) as { code: string }).code,
          ],
          `${action} ${JSON.stringify(headers)}`,
        ).toEqual([403, expect.stringContaining('application/problem+json'), 'CSRF_REJECTED']);
      }
    const stillWaiting = await alice.call('GET', `/api/orders/${id}/approval`);
    expect(stillWaiting.body.businessStatus).toBe('WAITING_USER_ACTION');
    expect((await alice.call('GET', `/api/orders/${id}`)).body.businessStatus).not.toMatch(/CANCEL/);

    // Its own page, with the token its page carries: the owner's approval goes through.
    const approved = await fetch(`${world.demo.url}/api/orders/${id}/approve`, {
      method: 'POST',
      headers: {
        cookie: aliceCookie(),
        origin: world.demo.url,
        'sec-fetch-site': 'same-origin',
        'x-csrf-token': token,
      },
    });
    expect(approved.status).toBe(200);
    expect(await approved.json()).toMatchObject({ outcome: expect.any(String) });
  });
});
