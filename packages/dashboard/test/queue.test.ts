/**
 * The queue page in Chromium against a real server and a real (test) worker: a tenant's concurrency key
 * at its limit shows its running and waiting steps and the tenant's placements on the chart; the operator
 * raises the limit with a reason on the page, the waiting steps start, the page shows it, and the change
 * is audited.
 */
import { newId } from '@tdp/protocol';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, loginToDashboard, screenshot } from '../../../test/browser.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { attemptEvent, startTestWorker } from '../../../test/testWorker.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let browser: Browser;
let ticking: NodeJS.Timeout;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
/** Attempts the worker holds until the test ends. */
const held: (() => void)[] = [];

beforeAll(async () => {
  h = await startHarness({
    runLoops: true,
    settings: { commandPollIntervalMs: 20, retryUnplaceableMs: 200, leaseCheckIntervalMs: 200 },
  });
  // The test clock keeps up with real time (parked requests come due on it).
  ticking = setInterval(() => h.clock.advance(20), 20);
  app = await h.createApplication(`queue-page-${newId()}`);
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'queue-page',
      version: '1',
      inputSchema: {
        type: 'object',
        required: ['customerId'],
        properties: { customerId: { type: 'string' } },
      },
      concurrency: [{ key: 'customer', value: '$.input.customerId', limit: 1 }],
      steps: [
        {
          key: 'work',
          capability: 'queue.page',
          capabilityVersion: '1',
          inputMapping: { customerId: '$.input.customerId' },
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
    nodeId: 'queue-page-node',
    capabilities: [{ name: 'queue.page', version: '1' }],
    maxConcurrency: 8,
    handler: async (command, report) => {
      await report([attemptEvent(command, 'STEP_STARTED', 1)]);
      await new Promise<void>((release) => held.push(release));
      await report([attemptEvent(command, 'STEP_COMPLETED', 2, { output: {}, durationMs: 1 })]);
    },
  });
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  clearInterval(ticking);
  for (const release of held.splice(0)) release();
  await worker?.stop();
  await browser?.close();
  await h?.close();
});

describe('the queue page', () => {
  it('shows a key at its limit with its counts; the operator raises the limit there (audited)', {
    timeout: 90_000,
  }, async () => {
    for (let i = 0; i < 3; i += 1) {
      const created = await h.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': newId() },
        body: {
          workflowName: 'queue-page',
          workflowVersion: '1',
          name: 'keyed',
          input: { customerId: '42' },
        },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
    }

    const page = await loginToDashboard(browser, h.url, h.adminToken);
    await page.click('a[href="#/queue"]');
    const tenant = page.locator(`section[data-tenant="${app.tenantId}"]`);
    const key = tenant.locator('tr[data-key="customer"]');
    const field = (name: string) => key.locator(`td[data-field="${name}"]`);
    // One runs, two wait for the key's single slot.
    await expect.poll(() => field('waiting').textContent(), { timeout: 15_000 }).toBe('2');
    expect(await field('running').textContent()).toBe('1');
    expect(await field('limit').textContent()).toBe('1 declared');
    expect(await tenant.locator('[data-field="tenant-counts"] [data-field="waiting"]').textContent()).toBe(
      '2',
    );
    expect(
      await tenant
        .locator(`tr[data-application="${app.applicationId}"] td[data-field="running"]`)
        .textContent(),
    ).toBe('1');
    // No quota of its own: the platform's tasks-in-flight setting applies.
    expect(
      await tenant
        .locator(`tr[data-application="${app.applicationId}"] td[data-field="quota"]`)
        .textContent(),
    ).toBe('platform setting');
    // The chart's legend counts the tenant's placement.
    await expect
      .poll(() =>
        page.locator(`[data-chart="share"] li[data-series="${app.tenantId}"]`).getAttribute('data-total'),
      )
      .toBe('1');

    // No reason, no change.
    await key.locator('input[name="limit"]').fill('3');
    expect(await key.locator('button[data-action="limit"]').isDisabled()).toBe(true);
    await key.locator('input[name="reason"]').fill('customer 42 upgraded');
    await key.locator('button[data-action="limit"]').click();

    await expect.poll(() => field('limit').textContent(), { timeout: 10_000 }).toBe('3 set (declared 1)');
    await expect.poll(() => field('waiting').textContent(), { timeout: 15_000 }).toBe('0');
    await expect.poll(() => field('running').textContent(), { timeout: 15_000 }).toBe('3');
    await screenshot(page, 'dashboard-queue');

    const audit = await h.request('GET', '/admin/v1/audit?action=CONCURRENCY_KEY_CHANGED', {
      token: h.adminToken,
    });
    expect(audit.body.items).toMatchObject([
      {
        subjectId: 'customer',
        tenantId: app.tenantId,
        reason: 'customer 42 upgraded',
        before: { limit: null },
        after: { limit: 3 },
      },
    ]);
  });
});
