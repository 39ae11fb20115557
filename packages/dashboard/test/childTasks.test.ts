/**
 * A child task on the dashboard, in Chromium against a real server. The parent's waiting step links to
 * its child, and the child's page links back to its parent. When the child ends (its signal sent), the
 * parent's page shows the step succeeded, live.
 */
import { newId } from '@tdp/protocol';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, loginToDashboard, screenshot } from '../../../test/browser.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let browser: Browser;

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  for (const body of [
    { name: 'dashboard-child', version: '1', steps: [{ key: 'go', kind: 'signal', signal: { name: 'go' } }] },
    {
      name: 'dashboard-parent',
      version: '1',
      steps: [{ key: 'sub', kind: 'task', task: { workflowName: 'dashboard-child', workflowVersion: '1' } }],
    },
  ]) {
    const published = await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
  }
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

describe('a child task on the task page', () => {
  it('links parent and child both ways, and the parent shows the child’s end', async () => {
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: 'dashboard-parent', workflowVersion: '1', name: 'parent', input: {} },
    });
    expect(created.status).toBe(201);
    const parentId = created.body.task.id as string;
    const page = await loginToDashboard(browser, h.url, h.adminToken);
    await page.goto(`${h.url}/dashboard/#/tasks/${parentId}`);

    const waiting = page.locator('[data-step-row="sub"] [data-waiting="task"]');
    await waiting.waitFor({ timeout: 15_000 });
    const childLink = waiting.locator('a', { hasText: 'Open the child task' });
    const childId = (await childLink.getAttribute('href'))!.replace('#/tasks/', '');
    expect(await waiting.textContent()).toContain(`Waiting for child task ${childId}`);
    await childLink.click();

    const back = page.locator(`[data-parent-task="${parentId}"]`);
    await back.waitFor({ timeout: 15_000 });
    await screenshot(page, 'dashboard-child-task');
    await back.click();
    await waiting.waitFor({ timeout: 15_000 });

    const sent = await h.request('POST', `/v1/tasks/${childId}/signals/go`, {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { payload: { ok: true } },
    });
    expect(sent.status).toBe(202);
    await expect
      .poll(() => page.locator('[data-step-row="sub"]').textContent(), { timeout: 15_000 })
      .toContain('SUCCEEDED');
    const parent = (await h.request('GET', `/v1/tasks/${parentId}`, { token: app.apiKey })).body;
    expect(parent.task.lifecycleStatus).toBe('SUCCEEDED');
    expect(parent.execution.steps[0].data).toEqual({ go: { ok: true } });
  });
});
