/**
 * An approval step on the dashboard's task page, in Chromium against a real server: the waiting step
 * says who can act, and the operator approves it with a reason — the task then succeeds, and the
 * decision (with the reason) is recorded as the operator's.
 */
import { newId } from '@tdp/protocol';
import type { Browser, Page } from 'playwright-core';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, loginToDashboard, screenshot } from '../../../test/browser.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { completeWith, startTestWorker } from '../../../test/testWorker.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
let browser: Browser;

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'dashboard-review',
      version: '1',
      steps: [
        { key: 'draft', capability: 'dashboard.draft', capabilityVersion: '1' },
        {
          key: 'review',
          kind: 'approval',
          dependsOn: ['draft'],
          approval: { approvers: { roles: ['editor'], owner: true }, required: 1 },
        },
      ],
    },
  });
  expect(published.status, JSON.stringify(published.body)).toBe(201);
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-dashboard-approval',
    capabilities: [{ name: 'dashboard.draft', version: '1' }],
    handler: completeWith({ text: 'draft' }),
  });
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await worker?.stop();
  await h?.close();
});

const login = (): Promise<Page> => loginToDashboard(browser, h.url, h.adminToken);

describe('an approval step on the task page', () => {
  it('shows who can act, and the operator approves it with a reason', async () => {
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: {
        workflowName: 'dashboard-review',
        workflowVersion: '1',
        name: 'press release',
        input: {},
        ownerId: 'olga',
      },
    });
    const taskId = created.body.task.id as string;
    const page = await login();
    await page.goto(`${h.url}/dashboard/#/tasks/${taskId}`);
    const waiting = page.locator('[data-approval="review"]');
    await waiting.waitFor({ timeout: 15_000 });
    await expect
      .poll(() => waiting.locator('[data-who-can-act]').textContent())
      .toBe('the owner · roles editor');
    expect(await waiting.textContent()).toContain('0 of 1');
    await screenshot(page, 'dashboard-approval-waiting');

    // Without a reason the buttons stay disabled.
    expect(await waiting.locator('button', { hasText: 'Approve' }).isDisabled()).toBe(true);
    await waiting.locator('input[aria-label="Reason"]').fill('approved by phone with the editor');
    await waiting.locator('button', { hasText: 'Approve' }).click();

    await expect
      .poll(
        async () =>
          (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body.task.lifecycleStatus,
        {
          timeout: 15_000,
        },
      )
      .toBe('SUCCEEDED');
    // The page moves on live: the step is no longer waiting, the timeline has the reason.
    await page.locator('[data-approval="review"]').waitFor({ state: 'detached', timeout: 15_000 });
    await page
      .locator('.timeline li', { hasText: 'approved by phone with the editor' })
      .waitFor({ timeout: 15_000 });
    const sql = postgres(h.databaseUrl, { max: 1 });
    try {
      expect(
        await sql`SELECT decided_by, decision, reason FROM step_decision WHERE task_id = ${taskId}`,
      ).toEqual([
        { decided_by: 'operator', decision: 'APPROVE', reason: 'approved by phone with the editor' },
      ]);
    } finally {
      await sql.end();
    }
    // Its waits allow 15 s each (a page under the whole suite's load); the default 30 s did not cover them.
  }, 90_000);
});
