/**
 * "Approve before the result is published", in real Chromium against a real TDP, the real worker
 * process and the demo app: after processing the order waits (shown live with Approve / Reject to its
 * owner); an approval ends the task, and on TDP's SUCCEEDED callback the app publishes the result (its
 * own business action) — only then can it be downloaded; a rejection ends the order REJECTED.
 */
import { mkdtempSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, screenshot } from '../../../test/browser.ts';
import { type DemoWorld, startDemoWorld } from './support.ts';

let world: DemoWorld;
let browser: Browser;
let sql: postgres.Sql;
const zip = join(mkdtempSync(join(tmpdir(), 'tdp-demo-approval-')), 'photos.zip');

beforeAll(async () => {
  world = await startDemoWorld();
  await writeFile(zip, world.samples.photos);
  sql = postgres(world.h.databaseUrl, { max: 1, onnotice: () => {} });
  browser = await launchBrowser();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await sql?.end();
  await world?.close();
});

async function openDemo(): Promise<Page> {
  const page = await (await browser.newContext({ acceptDownloads: true })).newPage();
  await page.goto(world.demo.url);
  await page.locator('#live[data-state="live"]').waitFor({ timeout: 15_000 });
  return page;
}

async function placeApprovalOrder(page: Page, name: string): Promise<string> {
  await page.setInputFiles('#file', zip);
  await page.locator('#upload-status[data-state="READY"]').waitFor();
  await page.fill('#name', name);
  await page.check('input[value="ARCHIVE_CLEAN_ONLY"]');
  await page.check('#approve-first');
  const rows = await page.locator('tr[data-order-id]').count();
  await page.click('#submit');
  await expect.poll(() => page.locator('tr[data-order-id]').count()).toBe(rows + 1);
  return (await page.locator('tr[data-order-id]').first().getAttribute('data-order-id'))!;
}

const statusOf = (page: Page, orderId: string) =>
  page.locator(`tr[data-order-id="${orderId}"] .status`).getAttribute('data-status');

describe('approve before the result is published', () => {
  it('waits after processing, shows Approve to its owner live, and publishes after approval', {
    timeout: 120_000,
  }, async () => {
    const page = await openDemo();
    const orderId = await placeApprovalOrder(page, 'Photos to approve');
    const row = page.locator(`tr[data-order-id="${orderId}"]`);
    await expect
      .poll(() => statusOf(page, orderId), { timeout: 60_000, interval: 100 })
      .toBe('AWAITING_APPROVAL');
    await row.locator('button.approve').waitFor();
    // A page loaded while the order waits asks the app once, and shows it waiting too.
    await page.reload();
    await page.locator('#live[data-state="live"]').waitFor({ timeout: 15_000 });
    await expect
      .poll(() => statusOf(page, orderId), { timeout: 15_000, interval: 100 })
      .toBe('AWAITING_APPROVAL');
    await row.locator('button.approve').waitFor();
    // Processed, but not published: no download yet.
    expect(await row.locator('a.download').count()).toBe(0);
    const [waiting] =
      await sql`SELECT business_status, published_at FROM demo.processing_order WHERE id = ${orderId}`;
    expect(waiting).toEqual({ business_status: 'RUNNING', published_at: null });
    await screenshot(page, 'demo-awaiting-approval');

    await row.locator('button.approve').click();
    await expect.poll(() => statusOf(page, orderId), { timeout: 30_000, interval: 100 }).toBe('SUCCEEDED');
    await row.locator('a.download').waitFor({ timeout: 15_000 });
    const [published] = await sql`SELECT published_at FROM demo.processing_order WHERE id = ${orderId}`;
    expect(published!.published_at).toBeInstanceOf(Date);
    const events = (await sql`SELECT kind FROM demo.order_event WHERE order_id = ${orderId} ORDER BY id`).map(
      (e) => e.kind,
    );
    // The app published after TDP's SUCCEEDED callback, in the same transaction that applied it.
    expect(events.indexOf('APPROVED_BY_OWNER')).toBeGreaterThan(-1);
    expect(events.indexOf('PUBLISHED')).toBe(events.indexOf('execution.succeeded') + 1);
    await screenshot(page, 'demo-approved-published');
  });

  it('ends REJECTED when its owner rejects it, with nothing published', { timeout: 120_000 }, async () => {
    const page = await openDemo();
    const orderId = await placeApprovalOrder(page, 'Photos to reject');
    const row = page.locator(`tr[data-order-id="${orderId}"]`);
    await expect
      .poll(() => statusOf(page, orderId), { timeout: 60_000, interval: 100 })
      .toBe('AWAITING_APPROVAL');
    await row.locator('button.reject').click();
    await expect.poll(() => statusOf(page, orderId), { timeout: 30_000, interval: 100 }).toBe('REJECTED');
    expect(await row.locator('button.approve').count()).toBe(0);
    expect(await row.locator('a.download').count()).toBe(0);
    const [order] =
      await sql`SELECT business_status, failure_code, published_at FROM demo.processing_order WHERE id = ${orderId}`;
    expect(order).toEqual({
      business_status: 'REJECTED',
      failure_code: 'APPROVAL_REJECTED',
      published_at: null,
    });
  });
});
