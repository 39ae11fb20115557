/**
 * The operator's actions in the dashboard, in Chromium against a real server and a real worker
 * process: Drain on the workers page (with a reason) shows the worker DRAINING, the process finishes
 * and exits, and once its session ends the worker is gone from the page; Requeue on the pipeline health
 * page sends a DEAD outbox row again. Both audited.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import { connectDatabase } from '@tdp/server';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { launchBrowser, loginToDashboard, screenshot } from '../../../test/browser.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { killAllWorkerProcesses, startWorkerProgramProcess } from '../../worker/test/support.ts';

/** Past the harness's worker heartbeat TTL (30 s). */
const pastHeartbeatTtlMs = 60_000;
let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let browser: Browser;
const directory = mkdtempSync(join(tmpdir(), 'tdp-dashboard-operator-'));

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'slow-wf',
      version: '1',
      steps: [{ key: 'only', capability: 'test.slow', capabilityVersion: '1' }],
    },
  });
  browser = await launchBrowser();
}, 60_000);
afterAll(async () => {
  killAllWorkerProcesses();
  await browser?.close();
  await h?.close();
});

it('Drain on the workers page: DRAINING, then gone once the session ends; audited', {
  timeout: 90_000,
}, async () => {
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key as string;
  const { workerId, exited } = await startWorkerProgramProcess({
    baseUrl: h.url,
    workerKey,
    dbPath: join(directory, 'worker.db'),
    nodeId: 'node-dashboard-drain',
    slowMs: 1_000,
  });

  const page = await loginToDashboard(browser, h.url, h.adminToken);
  await page.click('a[href="#/workers"]');
  const row = page.locator(`tr[data-worker-id="${workerId}"]`);
  await row.locator('td[data-state="READY"]').waitFor();
  // No reason, no drain: the button waits for one.
  expect(await row.locator('button[data-action="drain"]').isDisabled()).toBe(true);
  await row.locator('input[name="reason"]').fill('moving to the new rack');
  await row.locator('button[data-action="drain"]').click();
  await row.locator('td[data-state="DRAINING"]').waitFor({ timeout: 10_000 });
  await screenshot(page, 'dashboard-worker-draining');

  // The worker lets go by itself; once its heartbeats have stopped for the TTL the session ends.
  expect(await exited).toEqual({ code: 0, signal: null });
  h.clock.advance(pastHeartbeatTtlMs);
  await row.waitFor({ state: 'detached', timeout: 20_000 });

  const audit = await h.request('GET', `/admin/v1/audit?subjectId=${workerId}`, { token: h.adminToken });
  expect(audit.body.items).toMatchObject([{ action: 'WORKER_DRAIN', reason: 'moving to the new rack' }]);
});

it('Requeue on the pipeline health page sends the DEAD outbox rows again', { timeout: 60_000 }, async () => {
  await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName: 'slow-wf', workflowVersion: '1', name: 'nobody runs it', input: {} },
  });
  const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
  try {
    await expect
      .poll(async () => (await sql`SELECT 1 FROM outbox_event WHERE status <> 'PUBLISHED'`).length, {
        timeout: 10_000,
      })
      .toBe(0);
    const dead = await sql<{ id: string }[]>`
      UPDATE outbox_event SET status = 'DEAD', attempts = 20, last_error = 'bus refused', published_at = NULL
      RETURNING id`;
    expect(dead.length).toBeGreaterThan(0);

    const page = await loginToDashboard(browser, h.url, h.adminToken);
    await page.click('a[href="#/health"]');
    const line = page.locator('[data-dead-table="outbox"]');
    await line.waitFor();
    expect(await line.locator('[data-dead-count]').textContent()).toBe(String(dead.length));
    await line.locator('input[name="reason"]').fill('bus is back');
    await line.locator('button').click();
    await line.waitFor({ state: 'detached', timeout: 10_000 });
    await expect
      .poll(async () => (await sql`SELECT 1 FROM outbox_event WHERE status <> 'PUBLISHED'`).length, {
        timeout: 10_000,
      })
      .toBe(0);
    const audit = await h.request('GET', '/admin/v1/audit?action=DEAD_LETTERS_REQUEUE', {
      token: h.adminToken,
    });
    expect(audit.body.items).toMatchObject([{ subjectId: 'outbox', reason: 'bus is back' }]);
    expect(audit.body.items[0].details.requeued).toHaveLength(dead.length);
  } finally {
    await sql.end();
  }
});
