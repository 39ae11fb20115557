/**
 * The whole journey in real Chromium, with real processes: `tdp server` (killed with SIGKILL and
 * started again in one test), the worker process with the built-in capabilities, and the demo app.
 * The page is driven as a person would: choose a ZIP, pick the mode, press Process, watch the order
 * change live, download the result.
 */
import { mkdtempSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import postgres from 'postgres';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import yazl from 'yazl';
import { launchBrowser, screenshot, signInWithToken } from '../../../test/browser.ts';
import { createTestDatabase } from '../../../test/database.ts';
import { type TdpProcess, tdpProcess } from '../../../test/tdpProcess.ts';
import { readZip } from '../../capabilities/test/zips.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';
import { writeSamples } from '../../cli/src/samples.ts';
import {
  killAllWorkerProcesses,
  startWorkerProcess,
  stopWorkerProcess,
  type WorkerProcess,
} from '../../worker/test/support.ts';
import {
  type DemoApp,
  type DemoCredentials,
  ensureDemoApplication,
  registerDemoProvider,
  startDemoApp,
} from '../src/index.ts';

const directory = mkdtempSync(join(tmpdir(), 'tdp-demo-browser-'));
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let tdp: TdpProcess;
let demo: DemoApp;
let credentials: DemoCredentials;
let tenantId: string;
let worker: WorkerProcess;
let browser: Browser;
let sql: postgres.Sql;
const files = { photos: '', broken: '', album: '' };

/** A bigger album (so the order is visibly RUNNING for a while), with the usual junk. */
async function writeAlbum(path: string, images: number): Promise<void> {
  const zip = new yazl.ZipFile();
  for (let i = 0; i < images; i += 1) {
    const picture = await sharp({
      create: {
        width: 1600,
        height: 1200,
        channels: 3,
        background: { r: 40 + i * 4, g: 90, b: 160 - i * 2 },
      },
    })
      .jpeg({ quality: 90 })
      .toBuffer();
    zip.addBuffer(picture, `album/photo-${String(i + 1).padStart(2, '0')}.jpg`);
  }
  zip.addBuffer(Buffer.from('junk'), 'album/.DS_Store');
  zip.addBuffer(Buffer.from('fork'), '__MACOSX/album/._photo-01.jpg');
  zip.end();
  await writeFile(
    path,
    await new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      zip.outputStream
        .on('data', (c: Buffer) => chunks.push(c))
        .on('end', () => resolve(Buffer.concat(chunks)))
        .on('error', reject);
    }),
  );
}

beforeAll(async () => {
  database = await createTestDatabase();
  sql = postgres(database.url, { max: 2, onnotice: () => {} });
  tdp = tdpProcess({ databaseUrl: database.url, port: await freePort() });
  await tdp.start();
  const admin = { authorization: `Bearer ${tdp.adminToken}`, 'content-type': 'application/json' };
  const tenant = (await (
    await fetch(`${tdp.url}/admin/v1/tenants`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ name: 'browser' }),
    })
  ).json()) as { id: string };
  tenantId = tenant.id;
  credentials = await ensureDemoApplication(tdp.url, tdp.adminToken, tenant.id, null);
  demo = await startDemoApp({
    databaseUrl: database.url,
    dataDirectory: directory,
    port: 0,
    tdpUrl: tdp.url,
    ...credentials,
    reconcileAfterMs: 5_000,
    log: () => {},
  });
  await registerDemoProvider(tdp.url, tdp.adminToken, credentials, demo.url);
  const workerKey = (
    (await (
      await fetch(`${tdp.url}/admin/v1/worker-credentials`, { method: 'POST', headers: admin, body: '{}' })
    ).json()) as { key: string }
  ).key;
  worker = await startWorkerProcess(tdp.url, workerKey, join(directory, 'worker.db'), 'node-browser');
  const samples = await writeSamples(join(directory, 'samples'));
  files.photos = samples.find((s) => s.name === 'holiday-photos.zip')!.path;
  files.broken = samples.find((s) => s.name === 'broken.zip')!.path;
  files.album = join(directory, 'album.zip');
  await writeAlbum(files.album, 24);
  browser = await launchBrowser();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  if (worker) await stopWorkerProcess(worker);
  killAllWorkerProcesses();
  await demo?.close();
  await tdp?.kill('SIGTERM');
  await sql?.end();
  await database?.drop();
});

// Runs in the page: every status any order row shows, in order, and a marker a reload would wipe.
const recordStatuses = `(() => {
  const seen = {};
  window.seen = seen;
  window.notReloaded = true;
  const record = () => {
    for (const row of document.querySelectorAll('tr[data-order-id]')) {
      const status = row.querySelector('.status')?.dataset.status;
      const list = (seen[row.dataset.orderId] ??= []);
      if (status && list.at(-1) !== status) list.push(status);
    }
  };
  new MutationObserver(record).observe(document.body, { subtree: true, childList: true, attributes: true });
})()`;

/** Opens the demo page as a new visitor and waits for the live connection. */
/** What each demo page printed to its console (shown when a test times out). */
const consoleOf = new WeakMap<Page, string[]>();

async function openDemo(): Promise<Page> {
  const page = await (await browser.newContext({ acceptDownloads: true })).newPage();
  const log: string[] = [];
  page.on('console', (m) => log.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => log.push(`pageerror: ${e.message}`));
  consoleOf.set(page, log);
  await page.goto(demo.url);
  await page.locator('#live[data-state="live"]').waitFor({ timeout: 15_000 });
  // Every status any order row shows, in order, and a marker a reload would wipe.
  await page.evaluate(recordStatuses);
  return page;
}

async function placeOrder(
  page: Page,
  zip: string,
  name: string,
  mode: 'watermark' | 'clean',
  watermark?: string,
) {
  await page.setInputFiles('#file', zip);
  await page.locator('#upload-status[data-state="READY"]').waitFor();
  await page.fill('#name', name);
  if (mode === 'clean') await page.check('input[value="ARCHIVE_CLEAN_ONLY"]');
  else await page.fill('#watermark', watermark ?? '');
  const rows = await page.locator('tr[data-order-id]').count();
  await page.click('#submit');
  await expect.poll(() => page.locator('tr[data-order-id]').count()).toBe(rows + 1);
  return (await page.locator('tr[data-order-id]').first().getAttribute('data-order-id'))!;
}

/** The operator dashboard of the same TDP, logged in. */
async function openDashboard(): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  await page.goto(`${tdp.url}/dashboard/`);
  await signInWithToken(page, tdp.adminToken);
  await page.locator('.connection[data-state="LIVE"]').waitFor({ timeout: 15_000 });
  return page;
}

/** What TDP and the demo app know about an order, printed when a test times out waiting for it. */
async function diagnose(orderId: string, page: Page): Promise<string> {
  const headers = { authorization: `Bearer ${credentials.apiKey}` };
  const tasks = await (await fetch(`${tdp.url}/v1/tasks?externalRef=${orderId}`, { headers })).json();
  const workers = await (
    await fetch(`${tdp.url}/v1/workers`, { headers: { authorization: `Bearer ${tdp.adminToken}` } })
  ).text();
  const order = await sql`SELECT * FROM demo.processing_order WHERE id = ${orderId}`;
  const commands = await sql`SELECT * FROM demo.command_outbox WHERE order_id = ${orderId}`;
  const history = await (
    await fetch(`${tdp.url}/api/history`, {
      method: 'POST',
      headers: { 'x-api-key': 'gateway-api-key-for-tests', 'content-type': 'application/json' },
      body: JSON.stringify({
        channel: `task_user:${tenantId}/${credentials.applicationId}/${order[0]?.owner_id}`,
        limit: 100,
      }),
    })
  ).text();
  const publications = await page.evaluate('window.publications');
  const live = `${await page.locator('#live').getAttribute('data-state')}: ${await page.locator('#live').textContent()}`;
  const rows = await page.locator('#orders tbody').textContent();
  const log = consoleOf.get(page)?.slice(-30);
  return JSON.stringify({ order, commands, tasks, workers, history, publications, live, rows, log }, null, 1);
}

async function waitForStatus(page: Page, orderId: string, status: string, timeout: number) {
  try {
    await expect.poll(() => statusOf(page, orderId), { timeout, interval: 100 }).toBe(status);
  } catch (error) {
    console.error(await diagnose(orderId, page));
    throw error;
  }
}

const statusOf = (page: Page, orderId: string) =>
  page.locator(`tr[data-order-id="${orderId}"] .status`).getAttribute('data-status');

async function seenStatuses(page: Page, orderId: string): Promise<string[]> {
  return page.evaluate(`window.seen[${JSON.stringify(orderId)}] ?? []`);
}

const rank: Record<string, number> = { SUBMITTING: 0, SUBMITTED: 1, RUNNING: 2, SUCCEEDED: 3, FAILED: 3 };

describe('the demo page in Chromium', () => {
  it('clean then watermark "机密 Confidential": live SUBMITTING → RUNNING → SUCCEEDED, then the download is clean and marked', {
    timeout: 120_000,
  }, async () => {
    const page = await openDemo();
    await screenshot(page, 'demo-empty');
    const orderId = await placeOrder(page, files.album, 'Album', 'watermark', '机密 Confidential');
    await waitForStatus(page, orderId, 'SUCCEEDED', 60_000);
    const seen = await seenStatuses(page, orderId);
    expect(seen[0]).toBe('SUBMITTING');
    expect(seen).toContain('RUNNING');
    expect(seen.at(-1)).toBe('SUCCEEDED');
    expect(seen.map((s) => rank[s]!)).toEqual([...seen.map((s) => rank[s]!)].sort((a, b) => a - b));
    expect(await page.evaluate('window.notReloaded')).toBe(true);
    await page.click(`tr[data-order-id="${orderId}"] button:has-text("Timeline")`);
    const timeline = page.locator(`tr[data-timeline-of="${orderId}"] .timeline li`);
    await timeline.first().waitFor();
    const lines = await timeline.allTextContents();
    expect(lines[0]).toMatch(/order saved/);
    expect(lines.some((line) => /TDP accepted the task/.test(line))).toBe(true);
    // The last callback is there (a gap line may follow it when deliveries crossed).
    expect(lines.some((line) => /execution\.succeeded/.test(line))).toBe(true);
    await screenshot(page, 'demo-succeeded');

    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.click(`tr[data-order-id="${orderId}"] a.download`),
    ]);
    const saved = join(directory, 'downloaded.zip');
    await download.saveAs(saved);
    const before = await readZip(files.album);
    const after = await readZip(saved);
    expect([...after.keys()].sort()).toEqual(
      [...before.keys()].filter((n) => n.startsWith('album/photo-')).sort(),
    );
    const original = await sharp(before.get('album/photo-01.jpg')!).raw().toBuffer();
    const marked = await sharp(after.get('album/photo-01.jpg')!).raw().toBuffer();
    let differing = 0;
    for (let i = 0; i < original.length; i += 1) if (Math.abs(original[i]! - marked[i]!) > 24) differing += 1;
    expect(differing).toBeGreaterThan(1_000);
  });

  it('the dashboard shows the task of the same order live, then its DAG and timeline', {
    timeout: 90_000,
  }, async () => {
    const dashboard = await openDashboard();
    const demoPage = await openDemo();
    const orderId = await placeOrder(
      demoPage,
      files.album,
      'Album for the operator',
      'watermark',
      '机密 Confidential',
    );
    await waitForStatus(demoPage, orderId, 'SUCCEEDED', 60_000);
    const [order] = await sql<
      { task_id: string }[]
    >`SELECT task_id FROM demo.processing_order WHERE id = ${orderId}`;
    const row = dashboard.locator(`tr[data-task-id="${order!.task_id}"]`);
    await expect.poll(() => row.locator('.status').textContent(), { timeout: 15_000 }).toBe('SUCCEEDED');
    await row.locator('a').click();
    await dashboard.locator('svg.dag .node[data-step="watermark"][data-status="SUCCEEDED"]').waitFor();
    expect(await dashboard.locator('svg.dag .node[data-step="clean"]').getAttribute('data-status')).toBe(
      'SUCCEEDED',
    );
    const timeline = await dashboard.locator('.timeline li').allTextContents();
    expect(timeline.at(-1)).toMatch(/succeeded/);
    await expect
      .poll(() => dashboard.locator('.callbacks tbody tr').count(), { timeout: 20_000 })
      .toBeGreaterThan(3);
    await screenshot(dashboard, 'dashboard-task-of-order');
  });

  it('clean only: no watermark field, the result keeps the photos byte for byte', {
    timeout: 60_000,
  }, async () => {
    const page = await openDemo();
    await page.check('input[value="ARCHIVE_CLEAN_ONLY"]');
    expect(await page.locator('#watermark-label').isHidden()).toBe(true);
    const orderId = await placeOrder(page, files.photos, 'Holiday, cleaned', 'clean');
    await waitForStatus(page, orderId, 'SUCCEEDED', 30_000);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.click(`tr[data-order-id="${orderId}"] a.download`),
    ]);
    const saved = join(directory, 'cleaned.zip');
    await download.saveAs(saved);
    const before = await readZip(files.photos);
    const after = await readZip(saved);
    expect(after.size).toBeLessThan(before.size);
    for (const [name, bytes] of after) expect(bytes?.equals(before.get(name)!), name).toBe(true);
  });

  it('a broken ZIP ends FAILED with a reason a person can read', { timeout: 60_000 }, async () => {
    const page = await openDemo();
    const orderId = await placeOrder(page, files.broken, 'Broken archive', 'clean');
    await waitForStatus(page, orderId, 'FAILED', 30_000);
    const reason = await page.locator(`tr[data-order-id="${orderId}"] .failure`).textContent();
    expect(reason).toMatch(/ZIP/);
    expect(await page.locator(`tr[data-order-id="${orderId}"] a.download`).count()).toBe(0);
    await screenshot(page, 'demo-failed');
  });

  it('the form shows the order validation errors', async () => {
    const page = await openDemo();
    await page.setInputFiles('#file', files.photos);
    await page.locator('#upload-status[data-state="READY"]').waitFor();
    await page.fill('#name', '   ');
    await page.fill('#watermark', '');
    await page.click('#submit');
    await expect
      .poll(() => page.locator('#form-errors li').allTextContents())
      .toEqual([
        'name must have 1 to 200 characters',
        'watermarkText must have 1 to 100 characters for ARCHIVE_CLEAN_THEN_WATERMARK',
      ]);
    expect(await page.locator('tr[data-order-id]').count()).toBe(0);
  });

  it('TDP killed with SIGKILL mid-journey and started again: one successful order, each callback once', {
    timeout: 180_000,
  }, async () => {
    const dashboard = await openDashboard();
    const page = await openDemo();
    const orderId = await placeOrder(
      page,
      files.album,
      'Album through a crash',
      'watermark',
      '机密 Confidential',
    );
    await expect.poll(() => statusOf(page, orderId), { timeout: 60_000, interval: 50 }).toBe('RUNNING');
    await tdp.kill('SIGKILL');
    await page.locator('#live[data-state="reconnecting"]').waitFor({ timeout: 15_000 });
    await dashboard.locator('.connection[data-state="RECOVERING"]').waitFor({ timeout: 15_000 });
    await tdp.start();
    await waitForStatus(page, orderId, 'SUCCEEDED', 120_000);
    await page.locator('#live[data-state="live"]').waitFor({ timeout: 15_000 });
    await dashboard.locator('.connection[data-state="LIVE"]').waitFor({ timeout: 15_000 });

    const [order] = await sql<{ task_id: string; execution_id: string; result_asset_id: string | null }[]>`
      SELECT task_id, execution_id, result_asset_id FROM demo.processing_order WHERE id = ${orderId}`;
    expect(order!.result_asset_id).not.toBeNull();
    const tasks = await sql`SELECT id FROM task WHERE external_ref = ${orderId}`;
    expect(tasks).toHaveLength(1);
    // Every delivery TDP recorded for the execution went out (a send cut by the crash is retried after
    // a back-off), and each (execution, sequence) reached the inbox exactly once.
    const deliveries = async () =>
      (
        (await (
          await fetch(`${tdp.url}/v1/tasks/${order!.task_id}/callbacks`, {
            headers: { authorization: `Bearer ${credentials.apiKey}` },
          })
        ).json()) as { items: { sequence: number; status: string }[] }
      ).items;
    await expect
      .poll(async () => (await deliveries()).every((d) => d.status === 'DELIVERED'), { timeout: 60_000 })
      .toBe(true);
    const sent = (await deliveries()).map((d) => d.sequence).sort((a, b) => a - b);
    expect(sent).toEqual(sent.map((_, i) => i + 1));
    const inbox = await sql<{ sequence: number; n: number }[]>`
      SELECT sequence, count(*)::int AS n FROM demo.callback_inbox WHERE execution_id = ${order!.execution_id}
      GROUP BY sequence ORDER BY sequence`;
    expect(inbox.map((row) => [row.sequence, row.n])).toEqual(sent.map((sequence) => [sequence, 1]));
    const orders =
      await sql`SELECT count(*)::int AS n FROM demo.processing_order WHERE name = 'Album through a crash'`;
    expect(orders[0]!.n).toBe(1);
  });
});
