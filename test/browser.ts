/**
 * Real Chromium for page tests (Debian's package; `.ci/run` installs it), and where screenshots go.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';

export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** Test artifacts: screenshots of the main pages, kept after the run (`artifacts/screenshots`). */
export const screenshotDirectory = new URL('../artifacts/screenshots/', import.meta.url).pathname;

export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(screenshotDirectory, { recursive: true });
  const path = join(screenshotDirectory, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** A new page logged in to the dashboard at `baseUrl` with the admin token, its live feed connected. */
export async function loginToDashboard(browser: Browser, baseUrl: string, adminToken: string): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  await page.goto(`${baseUrl}/dashboard/`);
  await signInWithToken(page, adminToken);
  await page.locator('.connection[data-state="LIVE"]').waitFor({ timeout: 15_000 });
  return page;
}

/** On the dashboard's sign-in page: opens the bootstrap token's disclosure and signs in with the token. */
export async function signInWithToken(page: Page, adminToken: string): Promise<void> {
  await page.click('summary:has-text("bootstrap admin token")');
  await page.fill('form[data-login="token"] input[name="token"]', adminToken);
  await page.click('form[data-login="token"] button[type="submit"]');
}

/** On the dashboard's sign-in page: signs in with an operator's email and password. */
export async function signInWithPassword(page: Page, email: string, password: string): Promise<void> {
  await page.fill('form[data-login="password"] input[name="email"]', email);
  await page.fill('form[data-login="password"] input[name="password"]', password);
  await page.click('form[data-login="password"] button[type="submit"]');
}
