/**
 * The demo business application against a real TDP and the real worker process: uploads, orders with
 * their validation and idempotency, the command outbox, signed callbacks into the inbox, the
 * resource-provider contract, cancellation and the reconciler.
 */
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { signatureHeaderValue } from '@tdp/protocol';
import postgres from 'postgres';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readZip } from '../../capabilities/test/zips.ts';
import { type DemoWorld, startDemoWorld, visitor } from './support.ts';

let world: DemoWorld;
let sql: postgres.Sql;
let alice: ReturnType<typeof visitor>;

beforeAll(async () => {
  world = await startDemoWorld();
  sql = postgres(world.h.databaseUrl, { max: 2, onnotice: () => {} });
  alice = visitor(world, 'alice');
});
afterAll(async () => {
  await sql.end();
  await world.close();
});

const finished = async (user: ReturnType<typeof visitor>, orderId: string) => {
  let order: any;
  await expect
    .poll(
      async () => {
        order = (await user.call('GET', `/api/orders/${orderId}`)).body;
        return order.businessStatus;
      },
      { timeout: 30_000, interval: 100 },
    )
    .toMatch(/^(SUCCEEDED|FAILED|CANCELLED)$/);
  return order;
};

const zipEntries = async (bytes: Buffer) => {
  const path = join(world.directory, `${randomUUID()}.zip`);
  await writeFile(path, bytes);
  return readZip(path);
};

describe('the journey through the demo app', () => {
  it('upload, order "clean then watermark" with 机密 Confidential, result: junk gone, images marked', async () => {
    const upload = await alice.upload('holiday-photos.zip', world.samples.photos);
    expect(upload.status).toBe(201);
    expect(upload.body).toMatchObject({
      kind: 'SOURCE_ZIP',
      state: 'READY',
      sizeBytes: world.samples.photos.length,
    });

    const key = randomUUID();
    const request = {
      name: '  Holiday photos ',
      sourceAssetId: upload.body.id,
      processingMode: 'ARCHIVE_CLEAN_THEN_WATERMARK',
      watermarkText: '机密 Confidential',
    };
    const created = await alice.order(key, request);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'Holiday photos', businessStatus: 'SUBMITTING', progress: 0 });
    // The same key and request: the same order, not a second one.
    const replay = await alice.order(key, request);
    expect(replay.status).toBe(200);
    expect(replay.body.id).toBe(created.body.id);

    const done = await finished(alice, created.body.id);
    expect(done).toMatchObject({ businessStatus: 'SUCCEEDED', progress: 100, failure: null });
    expect(done.taskId).toMatch(/^[0-9a-f-]{36}$/);

    const download = await alice.call('GET', `/api/assets/${done.resultAssetId}/content`);
    expect(download.status).toBe(200);
    const before = await zipEntries(world.samples.photos);
    const after = await zipEntries(download.body);
    const junk = /(^|\/)(\.DS_Store|Thumbs\.db|desktop\.ini)$|^__MACOSX\//;
    expect([...before.keys()].some((name) => junk.test(name))).toBe(true);
    expect([...after.keys()].filter((name) => junk.test(name))).toEqual([]);
    const images = [...before.keys()].filter((name) => /\.(jpe?g|png)$/i.test(name) && !junk.test(name));
    expect(images.length).toBeGreaterThan(0);
    for (const name of images) {
      const original = await sharp(before.get(name)!).raw().toBuffer();
      const marked = await sharp(after.get(name)!).raw().toBuffer();
      expect(marked.length).toBe(original.length);
      let differing = 0;
      for (let i = 0; i < original.length; i += 1)
        if (Math.abs(original[i]! - marked[i]!) > 24) differing += 1;
      expect(differing, `${name} carries a visible watermark`).toBeGreaterThan(500);
    }

    // Exactly one TDP task for the order, and each callback sequence applied once.
    const tasks = await world.h.request('GET', `/v1/tasks?externalRef=${created.body.id}`, {
      token: world.credentials.apiKey,
    });
    expect(tasks.body.items).toHaveLength(1);
    const inbox = await sql<{ sequence: number; outcome: string }[]>`
      SELECT sequence, outcome FROM demo.callback_inbox WHERE order_id = ${created.body.id} ORDER BY sequence`;
    expect(inbox.map((row) => row.sequence)).toEqual([...new Set(inbox.map((row) => row.sequence))]);
    expect(inbox.at(-1)!.outcome).toMatch(/^APPLIED/);
    const timeline = (await alice.call('GET', `/api/orders/${created.body.id}/timeline`)).body.items.map(
      (e: { kind: string }) => e.kind,
    );
    expect(timeline[0]).toBe('ORDER_CREATED');
    expect(timeline).toContain('SUBMITTED_TO_TDP');
    expect(timeline).toContain('execution.succeeded');
  });

  it('clean only: the junk is gone and the images are untouched', async () => {
    const upload = await alice.upload('holiday-photos.zip', world.samples.photos);
    const created = await alice.order(randomUUID(), {
      name: 'Clean only',
      sourceAssetId: upload.body.id,
      processingMode: 'ARCHIVE_CLEAN_ONLY',
    });
    expect(created.status).toBe(201);
    const done = await finished(alice, created.body.id);
    expect(done.businessStatus).toBe('SUCCEEDED');
    const before = await zipEntries(world.samples.photos);
    const after = await zipEntries(
      (await alice.call('GET', `/api/assets/${done.resultAssetId}/content`)).body,
    );
    expect(after.size).toBeLessThan(before.size);
    for (const [name, bytes] of after) expect(bytes?.equals(before.get(name)!), name).toBe(true);
  });

  it('a broken ZIP ends FAILED with a readable reason and no result', async () => {
    const upload = await alice.upload('broken.zip', world.samples.broken);
    expect(upload.status).toBe(201);
    const created = await alice.order(randomUUID(), {
      name: 'Broken',
      sourceAssetId: upload.body.id,
      processingMode: 'ARCHIVE_CLEAN_ONLY',
    });
    const done = await finished(alice, created.body.id);
    expect(done.businessStatus).toBe('FAILED');
    expect(done.resultAssetId).toBeNull();
    expect(done.failure.code).toBe('ARCHIVE_INVALID');
    expect(done.failure.message).toMatch(/zip/i);
  });
});

describe('bad input changes nothing', () => {
  const orderCount = async () => Number((await sql`SELECT count(*) AS n FROM demo.processing_order`)[0]!.n);

  it('invalid orders are 422 with every field error, and write nothing', async () => {
    const upload = await alice.upload('holiday-photos.zip', world.samples.photos);
    const before = await orderCount();
    const cases: [Record<string, unknown>, string[]][] = [
      [
        { name: '   ', sourceAssetId: upload.body.id, processingMode: 'ARCHIVE_CLEAN_ONLY' },
        ['NAME_INVALID'],
      ],
      [
        {
          name: 'x',
          sourceAssetId: upload.body.id,
          processingMode: 'ARCHIVE_CLEAN_THEN_WATERMARK',
          watermarkText: '',
        },
        ['WATERMARK_INVALID'],
      ],
      [
        {
          name: 'x',
          sourceAssetId: upload.body.id,
          processingMode: 'ARCHIVE_CLEAN_ONLY',
          watermarkText: 'no',
        },
        ['WATERMARK_NOT_ALLOWED'],
      ],
      [
        {
          name: 'x',
          sourceAssetId: upload.body.id,
          processingMode: 'ARCHIVE_CLEAN_THEN_WATERMARK',
          watermarkText: '密'.repeat(101),
        },
        ['WATERMARK_INVALID'],
      ],
      [
        { name: 'x', sourceAssetId: randomUUID(), processingMode: 'SHRED' },
        ['PROCESSING_MODE_INVALID', 'SOURCE_NOT_READY'],
      ],
    ];
    for (const [body, codes] of cases) {
      const answer = await alice.order(randomUUID(), body);
      expect(answer.status).toBe(422);
      expect(answer.type).toContain('application/problem+json');
      expect(answer.body.code).toBe('ORDER_INVALID');
      expect(answer.body.errors.map((e: { code: string }) => e.code).sort()).toEqual(codes.sort());
    }
    // Another visitor's upload is not a source Alice may use.
    const bob = visitor(world, 'bob');
    const bobs = await bob.upload('holiday-photos.zip', world.samples.photos);
    const foreign = await alice.order(randomUUID(), {
      name: 'x',
      sourceAssetId: bobs.body.id,
      processingMode: 'ARCHIVE_CLEAN_ONLY',
    });
    expect(foreign.body.errors.map((e: { code: string }) => e.code)).toEqual(['SOURCE_NOT_READY']);
    expect((await alice.call('GET', `/api/assets/${bobs.body.id}/content`)).status).toBe(404);
    expect(await orderCount()).toBe(before);
  });

  it('an order needs an Idempotency-Key, and a key is not reused for another order', async () => {
    const upload = await alice.upload('holiday-photos.zip', world.samples.photos);
    const body = { name: 'keyed', sourceAssetId: upload.body.id, processingMode: 'ARCHIVE_CLEAN_ONLY' };
    const before = await orderCount();
    const keyless = await alice.call('POST', '/api/orders', body);
    expect([keyless.status, keyless.body.code]).toEqual([400, 'IDEMPOTENCY_KEY_REQUIRED']);
    const key = randomUUID();
    expect((await alice.order(key, body)).status).toBe(201);
    const reused = await alice.order(key, { ...body, name: 'another' });
    expect([reused.status, reused.body.code]).toEqual([409, 'IDEMPOTENCY_KEY_REUSED']);
    expect(await orderCount()).toBe(before + 1);
  });

  it('uploads must be multipart ZIPs within the size limit', async () => {
    const text = await alice.upload('notes.txt', Buffer.from('hello'));
    expect([text.status, text.body.code]).toEqual([415, 'NOT_A_ZIP']);
    const raw = await alice.call('POST', '/api/assets', { file: 'x' });
    expect([raw.status, raw.body.code]).toEqual([415, 'MULTIPART_REQUIRED']);
  });
});

describe('the endpoints TDP calls', () => {
  const callback = (
    body: object,
    secret = world.credentials.callbackSecret,
    at = Math.floor(Date.now() / 1000),
  ) => {
    const raw = JSON.stringify(body);
    return fetch(`${world.demo.url}/tdp/callbacks`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'tdp-signature': signatureHeaderValue([secret], at, raw),
      },
      body: raw,
    });
  };

  it('refuses callbacks with a wrong or stale signature, and applies a repeated one once', async () => {
    const [stored] = await sql<{ body: Record<string, unknown>; order_id: string }[]>`
      SELECT body, order_id FROM demo.callback_inbox WHERE type = 'execution.succeeded' LIMIT 1`;
    const wrong = await callback(stored!.body, 'whsec_wrong');
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { code: string }).code).toBe('SIGNATURE_MISMATCH');
    const stale = await callback(stored!.body, undefined, Math.floor(Date.now() / 1000) - 301);
    expect(((await stale.json()) as { code: string }).code).toBe('SIGNATURE_EXPIRED');
    const before = (await alice.call('GET', `/api/orders/${stored!.order_id}`)).body;
    const repeated = await callback(stored!.body);
    expect(repeated.status).toBe(200);
    expect(await repeated.json()).toEqual({ duplicate: true, outcome: 'DUPLICATE' });
    // A new event id with an older sequence of the same execution moves nothing back.
    const late = await callback({
      ...stored!.body,
      eventId: randomUUID(),
      sequence: 1,
      status: 'RUNNING',
      progress: 10,
    });
    expect(await late.json()).toEqual({ duplicate: false, outcome: 'NOT_NEWER' });
    expect((await alice.call('GET', `/api/orders/${stored!.order_id}`)).body).toEqual(before);
    const malformed = await callback({ ...stored!.body, eventId: 'nope' });
    expect([malformed.status, ((await malformed.json()) as { code: string }).code]).toEqual([
      400,
      'CALLBACK_MALFORMED',
    ]);
  });

  it('grants only the order’s own assets, to TDP’s token, through signed URLs that cannot be altered', async () => {
    const [order] = await sql<{ task_id: string; source_asset_id: string }[]>`
      SELECT task_id, source_asset_id FROM demo.processing_order WHERE task_id IS NOT NULL LIMIT 1`;
    const bob = visitor(world, 'bob');
    const other = (await bob.upload('holiday-photos.zip', world.samples.photos)).body.id as string;
    const ask = (resourceRef: string, token = 'provider-token-for-tests') =>
      fetch(`${world.demo.url}/tdp/grants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          grantId: randomUUID(),
          applicationId: world.credentials.applicationId,
          taskId: order!.task_id,
          attemptId: randomUUID(),
          purpose: 'DOWNLOAD',
          resourceRef,
        }),
      });
    expect((await ask(order!.source_asset_id, 'wrong')).status).toBe(401);
    expect((await ask(other)).status).toBe(403);
    const granted = (await (await ask(order!.source_asset_id)).json()) as { url: string; method: string };
    expect(granted.method).toBe('GET');
    expect((await fetch(granted.url)).status).toBe(200);
    expect((await fetch(granted.url.replace(order!.source_asset_id, other))).status).toBe(403);
    expect((await fetch(granted.url, { method: 'PUT', body: 'x' })).status).toBe(403);
  });
});

describe('output allocations', () => {
  it('the same idempotency key (a retry after a crash, a renewal) gets the same asset, another key another', async () => {
    const [order] = await sql<{ task_id: string }[]>`
      SELECT task_id FROM demo.processing_order WHERE task_id IS NOT NULL LIMIT 1`;
    const allocate = (idempotencyKey: string, headerOnly = false) =>
      fetch(`${world.demo.url}/tdp/grants`, {
        method: 'POST',
        headers: {
          authorization: 'Bearer provider-token-for-tests',
          'content-type': 'application/json',
          'idempotency-key': idempotencyKey,
        },
        body: JSON.stringify({
          grantId: randomUUID(),
          ...(headerOnly ? {} : { idempotencyKey }),
          applicationId: world.credentials.applicationId,
          taskId: order!.task_id,
          attemptId: randomUUID(),
          purpose: 'ARTIFACT',
          artifact: { relativePath: 'out/result.zip', mediaType: 'application/zip', maxBytes: 1_000 },
        }),
      }).then(async (r) => [r.status, (await r.json()) as { resourceRef: string; url: string }] as const);
    const key = randomUUID();
    const [firstStatus, first] = await allocate(key);
    const [againStatus, again] = await allocate(key);
    const [, byHeader] = await allocate(key, true);
    const [, other] = await allocate(randomUUID());
    expect([firstStatus, againStatus]).toEqual([200, 200]);
    expect(again.resourceRef).toBe(first.resourceRef);
    expect(byHeader.resourceRef).toBe(first.resourceRef);
    expect(other.resourceRef).not.toBe(first.resourceRef);
    const rows = await sql`SELECT id FROM demo.asset WHERE allocation_key = ${key}`;
    expect(rows.map((r) => r.id)).toEqual([first.resourceRef]);
  });
});

describe('cancelling and reconciling', () => {
  it('cancel is idempotent; an order no worker has started ends CANCELLED', async () => {
    await world.stopWorker();
    try {
      const upload = await alice.upload('holiday-photos.zip', world.samples.photos);
      const created = await alice.order(randomUUID(), {
        name: 'to cancel',
        sourceAssetId: upload.body.id,
        processingMode: 'ARCHIVE_CLEAN_ONLY',
      });
      const first = await alice.call('POST', `/api/orders/${created.body.id}/cancel`);
      const second = await alice.call('POST', `/api/orders/${created.body.id}/cancel`);
      expect(first.body).toMatchObject({ businessStatus: 'CANCELLING', cancelRequested: true });
      expect(second.body).toMatchObject({
        id: first.body.id,
        businessStatus: 'CANCELLING',
        cancelRequested: true,
      });
      const commands =
        await sql`SELECT command FROM demo.command_outbox WHERE order_id = ${created.body.id} ORDER BY created_at`;
      expect(commands.map((c) => c.command)).toEqual(['SUBMIT', 'CANCEL']);
      const done = await finished(alice, created.body.id);
      expect(done.businessStatus).toBe('CANCELLED');
      // Cancelling a finished order answers it as it is.
      const again = await alice.call('POST', `/api/orders/${created.body.id}/cancel`);
      expect([again.status, again.body.businessStatus]).toEqual([200, 'CANCELLED']);
      expect((await alice.call('POST', `/api/orders/${randomUUID()}/cancel`)).status).toBe(404);
    } finally {
      await world.startWorker();
    }
  });

  it('an order whose callbacks never came is brought up to date from TDP by the reconciler', async () => {
    const [order] = await sql<{ id: string; execution_id: string }[]>`
      SELECT id, execution_id FROM demo.processing_order WHERE business_status = 'SUCCEEDED' LIMIT 1`;
    // As if the last callbacks were lost: the order still shows RUNNING, a while ago.
    await sql`UPDATE demo.processing_order SET business_status = 'RUNNING', progress = 50, result_asset_id = NULL,
              updated_at = now() - interval '10 minutes' WHERE id = ${order!.id}`;
    await world.demo.tick();
    const fixed = (await alice.call('GET', `/api/orders/${order!.id}`)).body;
    expect(fixed).toMatchObject({
      businessStatus: 'SUCCEEDED',
      progress: 100,
      executionId: order!.execution_id,
    });
    expect(fixed.resultAssetId).not.toBeNull();
    const kinds = (await alice.call('GET', `/api/orders/${order!.id}/timeline`)).body.items.map(
      (e: { kind: string }) => e.kind,
    );
    expect(kinds.at(-1)).toBe('RECONCILED');
  });
});
