/**
 * The dashboard and the API docs in Chromium under their Content Security Policy (issue 38, item 5):
 * every page works with scripts and styles from the server's own files only (nothing the policy
 * refuses), the page sends its CSRF token with what it changes, and a page of another origin on the same
 * site (another port of the same host, as `tdp dev`'s demo app is) cannot log the operator out.
 */
import { createServer, type Server } from 'node:http';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, signInWithToken } from '../../../test/browser.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';

let h: Harness;
let browser: Browser;
let attacker: Server;
let attackerUrl: string;

beforeAll(async () => {
  h = await startHarness();
  browser = await launchBrowser();
  // Another origin of the same site: 127.0.0.1 on another port. Its page posts to the dashboard's logout.
  attacker = createServer((_request, response) =>
    response.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><script>
      fetch('${h.url}/dashboard/api/logout', { method: 'POST', mode: 'no-cors', credentials: 'include' })
        .finally(() => { document.title = 'sent'; });
    </script>`),
  );
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
  attackerUrl = `http://127.0.0.1:${(attacker.address() as { port: number }).port}/`;
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => attacker?.close(resolve));
  await h?.close();
});

/** A page whose policy violations are collected (reported by the browser as they happen). */
async function watchedPage(): Promise<{
  context: BrowserContext;
  page: Page;
  violations: () => Promise<string[]>;
}> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  await context.addInitScript(`
    window.violations = [];
    document.addEventListener('securitypolicyviolation', (event) =>
      window.violations.push(event.violatedDirective + ' ' + event.blockedURI));
  `);
  const page = await context.newPage();
  return {
    context,
    page,
    violations: () => page.evaluate('window.violations') as Promise<string[]>,
  };
}

describe('the dashboard under its Content Security Policy', () => {
  it('every page works with nothing refused, and logging out ends the session on the server', async () => {
    const { context, page, violations } = await watchedPage();
    const response = await page.goto(`${h.url}/dashboard/`);
    expect(response!.headers()['content-security-policy']).toContain("script-src 'self'");
    await signInWithToken(page, h.adminToken);
    await page.locator('.connection[data-state="LIVE"]').waitFor({ timeout: 15_000 });
    for (const route of ['tasks', 'workers', 'health', 'workflows', 'schedules', 'audit', 'operators']) {
      await page.goto(`${h.url}/dashboard/#/${route}`);
      await page.locator('main > *').first().waitFor({ timeout: 10_000 });
    }
    expect(await violations()).toEqual([]);
    // The stylesheet applied (a style from the built CSS file, not an inline one).
    expect(await page.evaluate("getComputedStyle(document.querySelector('header.top')).display")).toBe(
      'flex',
    );

    const [cookie] = await context.cookies(`${h.url}/dashboard/`);
    expect(cookie!.name).toBe('tdp_operator');
    // Log out through the page: its POST carries the CSRF token, so the session ends on the server.
    await page.click('text=Sign out');
    await page.locator('form[data-login="password"]').waitFor();
    const stale = await fetch(`${h.url}/dashboard/api/me`, {
      headers: { cookie: `${cookie!.name}=${cookie!.value}` },
    });
    expect(stale.status).toBe(401);
    await context.close();
  });

  it('a page of another origin on the same site cannot log the operator out', async () => {
    const { context, page } = await watchedPage();
    await page.goto(`${h.url}/dashboard/`);
    await signInWithToken(page, h.adminToken);
    await page.locator('.connection[data-state="LIVE"]').waitFor({ timeout: 15_000 });
    const evil = await context.newPage();
    await evil.goto(attackerUrl);
    await expect.poll(() => evil.title(), { timeout: 10_000 }).toBe('sent');
    await page.reload();
    await page.locator('.connection[data-state="LIVE"]').waitFor({ timeout: 15_000 });
    const [cookie] = await context.cookies(`${h.url}/dashboard/`);
    const me = await fetch(`${h.url}/dashboard/api/me`, {
      headers: { cookie: `${cookie!.name}=${cookie!.value}` },
    });
    expect(me.status).toBe(200);
    await context.close();
  });

  it('the API docs render under the same policy', async () => {
    const { context, page, violations } = await watchedPage();
    const response = await page.goto(`${h.url}/docs/`);
    expect(response!.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    await expect
      .poll(() => page.locator('.swagger-ui .info .title').textContent(), { timeout: 15_000 })
      .toMatch(/TDP API/);
    await page.locator('.opblock').first().waitFor();
    expect(await violations()).toEqual([]);
    await context.close();
  });
});
