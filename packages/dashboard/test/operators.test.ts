/**
 * Operators with names in the dashboard, in Chromium against a real server: a platform admin signs in
 * with email and password and sees their name in the header, creates a viewer on the Operators page;
 * the viewer (in a browser context of their own) sees no approve, drain or Operators controls; the
 * admin disables the viewer and the viewer's next navigation lands on the sign-in page; the audit page
 * lists the admin's actions under the admin's name.
 */
import { newId } from '@tdp/protocol';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, screenshot, signInWithPassword } from '../../../test/browser.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { completeWith, startTestWorker } from '../../../test/testWorker.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
let browser: Browser;

const admin = { email: 'ada@example.test', displayName: 'Ada Lovelace', password: 'analytical-engine-1843' };
const viewer = { email: 'grace@example.test', displayName: 'Grace Hopper', password: 'compiler-a0-1952' };

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'operators-review',
      version: '1',
      steps: [{ key: 'review', kind: 'approval', approval: { approvers: { owner: true }, required: 1 } }],
    },
  });
  expect(published.status, JSON.stringify(published.body)).toBe(201);
  // A connected worker, so the workers page has a row whose drain control a viewer must not get.
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-dashboard-operators',
    capabilities: [{ name: 'operators.noop', version: '1' }],
    handler: completeWith({}),
  });
  // The first admin, created with the bootstrap token.
  const created = await h.request('POST', '/admin/v1/operators', {
    token: h.adminToken,
    body: { ...admin, roles: [{ role: 'admin' }] },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await worker?.stop();
  await h?.close();
});

/** A browser context of its own (its own cookies), on the sign-in page. */
async function signInPage(): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  await page.goto(`${h.url}/dashboard/`);
  await page.locator('form[data-login="password"]').waitFor();
  return page;
}

async function signIn(who: { email: string; password: string }): Promise<Page> {
  const page = await signInPage();
  await signInWithPassword(page, who.email, who.password);
  await page.locator('.connection[data-state="LIVE"]').waitFor({ timeout: 15_000 });
  return page;
}

describe('operators in the dashboard', () => {
  it('an admin creates a viewer, who sees no controls and is out at the next navigation once disabled; the audit says who', {
    timeout: 120_000,
  }, async () => {
    // A wrong password is refused on the page, with the one message for every refusal.
    const refused = await signInPage();
    await signInWithPassword(refused, admin.email, 'not-the-password');
    await expect
      .poll(() => refused.locator('form[data-login="password"] [role="alert"]').textContent())
      .toMatch(/do not match an active operator/);
    await refused.context().close();

    const taskId = (
      await h.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': newId() },
        body: {
          workflowName: 'operators-review',
          workflowVersion: '1',
          name: 'budget',
          input: {},
          ownerId: 'olga',
        },
      })
    ).body.task.id as string;

    const ada = await signIn(admin);
    expect(await ada.locator('header [data-operator]').textContent()).toBe('Ada Lovelace · admin');
    // What the admin's role allows is on the page: approve, drain, the Operators page.
    await ada.goto(`${h.url}/dashboard/#/tasks/${taskId}`);
    await ada.locator('[data-approval="review"] button:has-text("Approve")').waitFor({ timeout: 15_000 });
    await ada.click('a[href="#/workers"]');
    await ada.locator(`tr[data-worker-id="${worker.workerId}"] [data-action="drain"]`).waitFor();

    await ada.click('a[href="#/operators"]');
    const form = ada.locator('form[data-form="new-operator"]');
    await form.locator('input[name="email"]').fill(viewer.email);
    await form.locator('input[name="displayName"]').fill(viewer.displayName);
    await form.locator('input[name="password"]').fill(viewer.password);
    await form.locator('select[name="role"]').selectOption('viewer');
    await form.locator('button[type="submit"]').click();
    const row = ada.locator(`tr[data-operator-email="${viewer.email}"]`);
    await row.waitFor({ timeout: 10_000 });
    expect(await row.locator('[data-field="status"]').textContent()).toBe('ACTIVE');
    expect(await row.textContent()).toContain('viewer');
    await screenshot(ada, 'dashboard-operators');

    const grace = await signIn(viewer);
    expect(await grace.locator('header [data-operator]').textContent()).toBe('Grace Hopper · viewer');
    expect(await grace.locator('header nav a').allTextContents()).not.toContain('Operators');
    await grace.goto(`${h.url}/dashboard/#/tasks/${taskId}`);
    const waiting = grace.locator('[data-approval="review"]');
    await waiting.waitFor({ timeout: 15_000 });
    expect(await waiting.locator('button').count()).toBe(0);
    // A platform-wide viewer sees the workers, without drain or cordon.
    await grace.click('a[href="#/workers"]');
    await grace.locator(`tr[data-worker-id="${worker.workerId}"]`).waitFor();
    expect(await grace.locator('[data-action="drain"], [data-action="cordon"]').count()).toBe(0);
    // The Operators page typed in by hand: not for this role.
    await grace.goto(`${h.url}/dashboard/#/operators`);
    await grace.locator('main [role="alert"]:has-text("Your role does not include this page")').waitFor();
    await grace.click('a[href="#/workflows"]');
    await grace.locator('main > *').first().waitFor();

    await row.locator('[data-action="disable"]').click();
    await expect.poll(() => row.locator('[data-field="status"]').textContent()).toBe('DISABLED');
    // Her session ended with the account: the next page she opens asks her to sign in.
    await grace.click('a[href="#/audit"]');
    await grace.locator('form[data-login="password"]').waitFor({ timeout: 10_000 });
    await grace.context().close();

    // The audit lists the admin's actions under her name; a click on the name narrows it to her.
    await ada.click('a[href="#/audit"]');
    const audited = ada.locator('table.audit tbody tr', { hasText: 'DISABLED' });
    await audited.first().waitFor({ timeout: 10_000 });
    expect(await audited.first().locator('[data-field="actor"]').textContent()).toBe('Ada Lovelace');
    await audited.first().locator('[data-field="actor"] button').click();
    await expect.poll(() => ada.locator('input[name="operatorId"]').inputValue()).toMatch(/^[0-9a-f-]{36}$/);
    await expect
      .poll(async () => new Set(await ada.locator('table.audit [data-field="actor"]').allTextContents()))
      .toEqual(new Set(['Ada Lovelace']));
    await screenshot(ada, 'dashboard-audit');
    await ada.context().close();
  });
});
