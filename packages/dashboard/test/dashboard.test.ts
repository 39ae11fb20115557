/**
 * The operator dashboard: its API behind the operator session, and its pages in Chromium against a real
 * server and worker process — a task appears and moves live, its DAG and timeline show, workers and
 * the reasons a step waits, pipeline health, workflows; errors never leave a blank screen.
 */

import { mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, loginToDashboard, screenshot } from '../../../test/browser.ts';
import { type FileStore, startFileStore } from '../../../test/fileStore.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { attemptEvent, startTestWorker } from '../../../test/testWorker.ts';
import { writeSamples } from '../../cli/src/samples.ts';
import { demoWorkflows, workflowDefinitions } from '../../demo-app/src/index.ts';
import {
  killAllWorkerProcesses,
  startWorkerProcess,
  stopWorkerProcess,
  type WorkerProcess,
} from '../../worker/test/support.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let store: FileStore;
let worker: WorkerProcess;
let browser: Browser;
let receiver: Server;
let callbackUrl: string;
const directory = mkdtempSync(join(tmpdir(), 'tdp-dashboard-'));

beforeAll(async () => {
  store = await startFileStore();
  h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
  app = await h.createApplication();
  await h.request('PUT', `/admin/v1/applications/${app.applicationId}/resource-provider`, {
    token: h.adminToken,
    body: { url: store.providerUrl, bearerToken: store.token },
  });
  // The demo app's "clean, then watermark" workflow, and one no worker here can run.
  for (const definition of [
    workflowDefinitions().find((d) => d.name === demoWorkflows.cleanThenWatermark)!,
    {
      name: 'needs-gpu',
      version: '1',
      steps: [{ key: 'render', capability: 'video.render', capabilityVersion: '2' }],
    },
    {
      name: 'long-job',
      version: '1',
      steps: [{ key: 'crunch', capability: 'test.crunch', capabilityVersion: '1' }],
    },
  ])
    await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: definition });
  receiver = createServer((request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(204).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  callbackUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/callbacks`;
  const samples = await writeSamples(join(directory, 'samples'));
  store.files.set('photos', await readFile(samples.find((s) => s.name === 'holiday-photos.zip')!.path));
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key as string;
  worker = await startWorkerProcess(h.url, workerKey, join(directory, 'worker.db'), 'node-dashboard');
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  if (worker) await stopWorkerProcess(worker);
  killAllWorkerProcesses();
  await new Promise((resolve) => receiver?.close(resolve));
  await h?.close();
  await store?.close();
});

const submit = async (workflowName: string, name: string, input: Record<string, unknown> = {}) =>
  (
    await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName, workflowVersion: '1', name, input, callbackUrl },
    })
  ).body.task.id as string;

const login = (): Promise<Page> => loginToDashboard(browser, h.url, h.adminToken);

describe('the dashboard API', () => {
  it('answers only an operator session, which only the admin token opens', async () => {
    const anonymous = await fetch(`${h.url}/dashboard/api/tasks`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('content-type')).toContain('application/problem+json');
    const wrong = await fetch(`${h.url}/dashboard/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: 'not-the-token' }),
    });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    // An application key is not an operator.
    const appKey = await fetch(`${h.url}/dashboard/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: app.apiKey }),
    });
    expect(appKey.status).toBe(401);
    const ok = await fetch(`${h.url}/dashboard/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: h.adminToken }),
    });
    const cookie = ok.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^tdp_operator=[^;]+; Path=\/dashboard; HttpOnly; SameSite=Strict/);
    const session = cookie.split(';')[0]!;
    const tasks = await fetch(`${h.url}/dashboard/api/tasks?status=RUNNING`, {
      headers: { cookie: session },
    });
    expect(tasks.status).toBe(200);
    const bad = await fetch(`${h.url}/dashboard/api/tasks?status=SLEEPING`, { headers: { cookie: session } });
    expect([bad.status, ((await bad.json()) as { code: string }).code]).toEqual([400, 'VALIDATION_FAILED']);
    const forged = `${session.slice(0, -4)}AAAA`;
    expect((await fetch(`${h.url}/dashboard/api/tasks`, { headers: { cookie: forged } })).status).toBe(401);
    const token = (await (
      await fetch(`${h.url}/dashboard/api/realtime-token`, { headers: { cookie: session } })
    ).json()) as {
      channel: string;
    };
    expect(token.channel).toBe('task_ops:all');
  });
});

describe('the dashboard pages', () => {
  it('are served from the build: the page uncached, its hashed assets cached for good, nothing else', async () => {
    const page = await fetch(`${h.url}/dashboard/`);
    expect([page.status, page.headers.get('cache-control')]).toEqual([200, 'no-cache']);
    const asset = /src="\/dashboard\/(assets\/[^"]+\.js)"/.exec(await page.text())![1]!;
    const script = await fetch(`${h.url}/dashboard/${asset}`);
    expect(script.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(script.headers.get('content-type')).toContain('javascript');
    expect((await fetch(`${h.url}/dashboard/%2e%2e/%2e%2e/package.json`)).status).toBe(404);
  });
});

describe('the dashboard in Chromium', () => {
  it('shows a new task appear and finish live, then its DAG, attempts, timeline and callbacks', {
    timeout: 90_000,
  }, async () => {
    const page = await login();
    const before = Number(await page.locator('b[data-count="SUCCEEDED"]').textContent());
    const marker = `marker-${Date.now()}`;
    await page.evaluate(`window.${marker.replace('-', '_')} = true`);
    const taskId = await submit(demoWorkflows.cleanThenWatermark, 'Holiday photos', {
      source: 'photos',
      text: '机密 Confidential',
    });
    const row = page.locator(`tr[data-task-id="${taskId}"]`);
    await row.waitFor({ timeout: 10_000 });
    await expect.poll(() => row.locator('.status').textContent(), { timeout: 30_000 }).toBe('SUCCEEDED');
    await expect
      .poll(async () => Number(await page.locator('b[data-count="SUCCEEDED"]').textContent()), {
        timeout: 10_000,
      })
      .toBe(before + 1);
    expect(await page.evaluate(`window.${marker.replace('-', '_')}`)).toBe(true); // no reload
    await screenshot(page, 'dashboard-tasks');

    await row.locator('a').click();
    await page.locator('svg.dag').waitFor();
    const nodes = page.locator('svg.dag .node');
    const states: [string | null, string | null][] = [];
    for (let i = 0; i < (await nodes.count()); i += 1)
      states.push([
        await nodes.nth(i).getAttribute('data-step'),
        await nodes.nth(i).getAttribute('data-status'),
      ]);
    expect(states).toEqual([
      ['clean', 'SUCCEEDED'],
      ['watermark', 'SUCCEEDED'],
    ]);
    expect(await page.locator('svg.dag path.edge').count()).toBe(1);
    expect(await page.locator('dd[data-engine]').getAttribute('data-engine')).toBe('native');
    expect(await page.locator('dd[data-engine]').textContent()).toBe('TDP (native)');
    const attempts = await page.locator('.panel:has(h2:text("Attempts")) tbody tr').allTextContents();
    expect(attempts).toHaveLength(2);
    expect(attempts.join(' ')).toContain('node-dashboard');
    const timeline = await page.locator('.timeline li').allTextContents();
    expect(timeline.some((line) => /worker|selected/i.test(line))).toBe(true);
    await expect
      .poll(() => page.locator('.callbacks tbody tr').count(), { timeout: 20_000 })
      .toBeGreaterThan(2);
    await screenshot(page, 'dashboard-task');
  });

  it('a waiting step shows why it is not placed, and a cancel from elsewhere is followed on its page', {
    timeout: 60_000,
  }, async () => {
    const page = await login();
    const taskId = await submit('needs-gpu', 'Waits for a GPU');
    await page.goto(`${h.url}/dashboard/#/tasks/${taskId}`);
    const render = page.locator('svg.dag .node[data-step="render"]');
    await render.waitFor();
    expect(['READY', 'QUEUED']).toContain(await render.getAttribute('data-status'));
    await expect
      .poll(() => page.locator('[data-step-row="render"] .reason').allTextContents(), { timeout: 15_000 })
      .toEqual([expect.stringContaining('video.render@2')]);
    // The row stands out as waiting for a worker, saying so.
    const row = page.locator('[data-step-row="render"]');
    expect(await row.getAttribute('class')).toBe('waiting-for-worker');
    expect(await row.locator('.waiting-title').textContent()).toBe('Waiting for a worker:');
    // Cancelled from elsewhere: the page follows.
    await h.request('POST', `/v1/tasks/${taskId}:cancel`, { token: app.apiKey, body: {} });
    await expect.poll(() => page.locator('h1 .status').textContent(), { timeout: 10_000 }).toBe('CANCELLED');
  });

  it('a running step shows its progress and an elapsed time that counts on the page', {
    timeout: 60_000,
  }, async () => {
    // A worker that starts the step, reports 40 % and keeps it running.
    const workerKey = (
      await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
    ).body.key as string;
    const slow = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-slow',
      capabilities: [{ name: 'test.crunch', version: '1' }],
      handler: async (command, report) => {
        await report([
          attemptEvent(command, 'STEP_STARTED', 1),
          attemptEvent(command, 'STEP_PROGRESS', 2, { progress: { percent: 40 } }),
        ]);
      },
    });
    try {
      const page = await login();
      const taskId = await submit('long-job', 'Crunch numbers');
      const row = page.locator(`tr[data-task-id="${taskId}"]`);
      await expect.poll(() => row.locator('.status').textContent(), { timeout: 15_000 }).toBe('RUNNING');
      await row.locator('a').click();
      const node = page.locator('svg.dag .node[data-step="crunch"]');
      await expect.poll(() => node.getAttribute('data-status'), { timeout: 10_000 }).toBe('RUNNING');
      await expect
        .poll(() => page.locator('[data-step-row="crunch"] progress').getAttribute('value'))
        .toBe('40');
      const elapsedCell = page.locator('[data-step-row="crunch"] td').nth(4);
      const first = await elapsedCell.textContent();
      await new Promise((resolve) => setTimeout(resolve, 1_300));
      expect(await elapsedCell.textContent()).not.toBe(first);
      // The status filters: a RUNNING task is under RUNNING, not under FAILED.
      await page.click('a[href="#/tasks"]');
      await page.click('.counts button:has-text("FAILED")');
      await expect.poll(() => page.locator(`tr[data-task-id="${taskId}"]`).count()).toBe(0);
      await page.click('.counts button:has-text("RUNNING")');
      await page.locator(`tr[data-task-id="${taskId}"]`).waitFor();
      await h.request('POST', `/v1/tasks/${taskId}:cancel`, { token: app.apiKey, body: {} });
    } finally {
      await slow.stop();
    }
  });

  it('workers: capabilities, trusted labels and heartbeat; steps that wait, with the reason', {
    timeout: 60_000,
  }, async () => {
    const waiting = await submit('needs-gpu', 'Render the trailer');
    const page = await login();
    await page.click('a[href="#/workers"]');
    const workerRow = page.locator(`tr[data-worker-id="${worker.workerId}"]`);
    await workerRow.waitFor();
    expect(await workerRow.textContent()).toContain('archive.clean@1');
    const queued = page.locator('.panel:has(h2:text("Steps waiting")) tbody tr', {
      hasText: 'Render the trailer',
    });
    await queued.waitFor({ timeout: 15_000 });
    expect(await queued.textContent()).toContain('video.render@2');
    await screenshot(page, 'dashboard-workers');
    await h.request('POST', `/v1/tasks/${waiting}:cancel`, { token: app.apiKey, body: {} });
  });

  it('pipeline health and workflows', async () => {
    const page = await login();
    await page.click('a[href="#/health"]');
    await page.locator('[data-card="Callbacks DEAD"] .value').waitFor();
    expect(await page.locator('[data-card="Callbacks DEAD"] .value').textContent()).toBe('0');
    await screenshot(page, 'dashboard-health');
    await page.click('a[href="#/workflows"]');
    const workflow = page.locator(`[data-workflow="${demoWorkflows.cleanThenWatermark}"]`);
    await workflow.waitFor();
    expect(await workflow.locator('.node').count()).toBe(2);
  });

  it('schedules with their next fire times', async () => {
    const created = await h.request('POST', '/v1/schedules', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: {
        cron: '0 6 * * 1',
        timeZone: 'UTC',
        workflowName: 'needs-gpu',
        workflowVersion: '1',
        overlap: 'SKIP',
      },
    });
    expect(created.status).toBe(201);
    const page = await login();
    await page.click('a[href="#/schedules"]');
    const row = page.locator(`[data-schedule="${created.body.id}"]`);
    await row.waitFor();
    expect(await row.locator('[data-field="next"]').textContent()).toContain(created.body.nextFireTimes[1]);
    expect(await row.locator('[data-field="state"]').textContent()).toBe('active');
  });

  it('errors never leave a blank screen; logging out closes the session', async () => {
    const page = await login();
    await page.goto(`${h.url}/dashboard/#/tasks/${newId()}`);
    await expect
      .poll(() => page.locator('.panel.error').textContent(), { timeout: 10_000 })
      .toMatch(/does not exist/);
    await page.click('text=Sign out');
    await page.locator('form[data-login="password"]').waitFor();
    await page.reload();
    await page.locator('form[data-login="password"]').waitFor();
  });
});
