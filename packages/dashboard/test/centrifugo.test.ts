/**
 * The dashboard's live view when a real Centrifugo serves the browsers (docs/realtime.md, "Moving to
 * Centrifugo"): the page gets its WebSocket URL and operator token from TDP, connects to Centrifugo
 * (not to the server), and a task created after the page loaded appears in the list without a reload.
 */
import { newId } from '@tdp/protocol';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, loginToDashboard } from '../../../test/browser.ts';
import {
  type CentrifugoProcess,
  centrifugoMode,
  newTokenSecret,
  requireCentrifugo,
  startCentrifugo,
} from '../../../test/centrifugo.ts';
import { publishLiveWorkflow } from '../../../test/fixtures.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';

const binary = requireCentrifugo();

describe.skipIf(!binary)('the dashboard with a real Centrifugo, in Chromium', () => {
  const tokenSecret = newTokenSecret();
  let centrifugo: CentrifugoProcess;
  let h: Harness;
  let browser: Browser;

  beforeAll(async () => {
    // The dashboard is served by TDP on a port of its own: Centrifugo accepts pages from there.
    centrifugo = await startCentrifugo({
      binary: binary!,
      tokenSecret,
      allowedOrigins: ['http://127.0.0.1:*'],
    });
    h = await startHarness({
      runLoops: true,
      ...centrifugoMode(centrifugo, tokenSecret),
    });
    browser = await launchBrowser();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
    await centrifugo?.stop();
  });

  it('connects to Centrifugo, and a task created after the page loaded appears live', {
    timeout: 60_000,
  }, async () => {
    const app = await h.createApplication();
    const createTask = await publishLiveWorkflow(h, app.apiKey, newId);
    const clients = async () => {
      const response = await fetch(`${centrifugo.apiUrl}/info`, {
        method: 'POST',
        headers: { 'x-api-key': centrifugo.apiKey, 'content-type': 'application/json' },
        body: '{}',
      });
      const body = (await response.json()) as { result?: { nodes?: { num_clients?: number }[] } };
      return (body.result?.nodes ?? []).reduce((sum, node) => sum + (node.num_clients ?? 0), 0);
    };
    expect(await clients()).toBe(0);
    const page = await loginToDashboard(browser, h.url, h.adminToken);
    // LIVE is what the page shows once its SDK connected: to Centrifugo, whose one client it is.
    // (Centrifugo counts its clients every few seconds.)
    await expect.poll(clients, { timeout: 15_000, interval: 500 }).toBe(1);
    // The list loads no more after this: what appears now came over Centrifugo.
    let listLoads = 0;
    page.on('request', (request) => {
      if (new URL(request.url()).pathname === '/dashboard/api/tasks') listLoads += 1;
    });
    const marker = `marker_${Date.now()}`;
    await page.evaluate(`window.${marker} = true`);
    const taskId = await createTask('dashboard-user');
    await page.locator(`tr[data-task-id="${taskId}"]`).waitFor({ timeout: 15_000 });
    expect(await page.evaluate(`window.${marker}`)).toBe(true); // no reload
    expect(listLoads).toBe(0);
    await h.request('POST', `/v1/tasks/${taskId}:cancel`, { token: app.apiKey });
    await expect
      .poll(() => page.locator(`tr[data-task-id="${taskId}"] .status`).textContent(), { timeout: 15_000 })
      .toBe('CANCELLED');
  });
});
