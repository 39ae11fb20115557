/**
 * Steps TDP runs itself on the dashboard's task page, in Chromium against a real server: the DAG shows a
 * signal step's kind and that it waits, the step row says for what, and the operator sends the signal
 * with a payload and a reason — the task then goes on with that payload, the reason in the timeline.
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
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'dashboard-gate',
      version: '1',
      steps: [
        {
          key: 'gate',
          kind: 'signal',
          signal: { name: 'open', payloadSchema: { type: 'object', required: ['by'] } },
        },
        { key: 'rest', kind: 'sleep', dependsOn: ['gate'], sleep: { durationMs: 1 } },
      ],
    },
  });
  expect(published.status, JSON.stringify(published.body)).toBe(201);
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

describe('a waiting signal step on the task page', () => {
  it('shows its kind and what it waits for; the operator sends the signal with a reason', async () => {
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: 'dashboard-gate', workflowVersion: '1', name: 'gated', input: {} },
    });
    const taskId = created.body.task.id as string;
    const page = await loginToDashboard(browser, h.url, h.adminToken);
    await page.goto(`${h.url}/dashboard/#/tasks/${taskId}`);

    const waiting = page.locator('[data-step-row="gate"] [data-waiting="signal"]');
    await waiting.waitFor({ timeout: 15_000 });
    expect(await waiting.textContent()).toContain('Waiting for the signal open');
    const node = page.locator('.dag [data-step="gate"]');
    expect(await node.getAttribute('data-kind')).toBe('signal');
    await expect.poll(() => node.textContent()).toContain('waiting (signal)');
    expect(await page.locator('.dag [data-step="rest"]').getAttribute('data-kind')).toBe('sleep');
    await screenshot(page, 'dashboard-signal-waiting');

    // A payload its schema refuses is shown as the server's answer; nothing is kept.
    await waiting.locator('input[aria-label="Reason"]').fill('the customer called');
    await waiting.locator('textarea[aria-label="Payload"]').fill('{"who":"nobody"}');
    await waiting.locator('button', { hasText: 'Send open' }).click();
    await waiting.locator('.failure').waitFor({ timeout: 10_000 });
    await waiting.locator('textarea[aria-label="Payload"]').fill('{"by":"support"}');
    await waiting.locator('button', { hasText: 'Send open' }).click();

    const read = async () => (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
    // The sleep after the gate waits 1 ms of the harness's clock, which moves only when told to.
    await expect
      .poll(
        async () =>
          (await read()).execution.steps.find((s: { key: string }) => s.key === 'rest').waitingFor?.kind,
      )
      .toBe('sleep');
    h.clock.advance(5);
    await expect.poll(async () => (await read()).task.lifecycleStatus, { timeout: 15_000 }).toBe('SUCCEEDED');
    expect((await read()).execution.steps.find((s: { key: string }) => s.key === 'gate').data).toEqual({
      by: 'support',
    });
    await page.locator('.timeline li', { hasText: 'the customer called' }).waitFor({ timeout: 15_000 });
    await page.locator('[data-waiting="signal"]').waitFor({ state: 'detached', timeout: 15_000 });
  }, 90_000);
});
