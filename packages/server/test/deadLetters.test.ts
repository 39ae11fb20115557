/**
 * The operator's requeue of dead letters (`POST /admin/v1/dead-letters:requeue`, callbacks): DEAD
 * deliveries named by id (or the oldest, when none is named) are sent again, as `:redeliver` sends one;
 * rows that are not DEAD are left alone; the action is audited with the reason and the ids. Bad input
 * is a problem with its code and changes nothing.
 */
import { createServer, type Server } from 'node:http';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let receiver: Server;
let receiverUrl: string;
let accepting = false;
const received: string[] = [];

beforeAll(async () => {
  h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
  app = await h.createApplication();
  await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() });
  receiver = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => {
      if (!accepting) return res.writeHead(503).end();
      received.push(JSON.parse(raw).taskId);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const address = receiver.address();
  receiverUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/cb`;
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => receiver.close(resolve));
});

const submit = async () =>
  (
    await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: {
        workflowName: 'zip-clean-watermark',
        workflowVersion: '1',
        name: 'dead letters',
        input: { sourceZip: 'asset://z1', watermarkText: 'x' },
        callbackUrl: receiverUrl,
      },
    })
  ).body.task.id as string;
const log = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}/callbacks`, { token: app.apiKey })).body.items as {
    id: string;
    status: string;
  }[];
const requeue = (body: unknown) =>
  h.request('POST', '/admin/v1/dead-letters:requeue', { token: h.adminToken, body });

it('requeues DEAD callbacks by id, then all that are left; leaves the others; audited; bad input changes nothing', async () => {
  const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
  try {
    // No worker offers the steps: each task's one callback is its execution's creation. The receiver
    // refuses it; once it has failed, it is made DEAD as twenty failures would (see run.test.ts).
    const [first, second] = [await submit(), await submit()];
    for (const taskId of [first, second])
      await expect
        .poll(async () => {
          const moved = await sql`
            UPDATE callback_delivery SET status = 'DEAD', attempts = 20
            WHERE task_id = ${taskId} AND status = 'FAILED' RETURNING id`;
          return moved.length;
        })
        .toBe(1);
    const [dead] = await log(first);
    expect(dead).toMatchObject({ status: 'DEAD' });

    const before = await sql`SELECT id, status, attempts FROM callback_delivery ORDER BY id`;
    for (const bad of [
      { table: 'callbacks', ids: [dead!.id] },
      { table: 'callbacks', ids: [dead!.id], reason: '' },
      { table: 'timers', reason: 'no such table' },
      { table: 'callbacks', ids: ['not-a-uuid'], reason: 'x' },
    ]) {
      const answer = await requeue(bad);
      expect(answer.status).toBe(400);
      expect(answer.body.code).toBe('VALIDATION_FAILED');
    }
    const anonymous = await h.request('POST', '/admin/v1/dead-letters:requeue', {
      token: app.apiKey,
      body: { table: 'callbacks', reason: 'x' },
    });
    expect(anonymous.status).toBe(401);
    expect(await sql`SELECT id, status, attempts FROM callback_delivery ORDER BY id`).toEqual(before);

    accepting = true;
    // By id: only the named DEAD row (a random id names nothing).
    const named = await requeue({ table: 'callbacks', ids: [dead!.id, newId()], reason: 'receiver fixed' });
    expect(named.status).toBe(200);
    expect(named.body).toMatchObject({ table: 'callbacks', requeued: [dead!.id] });
    await expect.poll(async () => (await log(first))[0]?.status, { timeout: 10_000 }).toBe('DELIVERED');
    expect(received.filter((t) => t === first)).toHaveLength(1);
    expect((await log(second))[0]?.status).toBe('DEAD');

    // Named again, now DELIVERED: not DEAD, left alone (not sent twice).
    expect((await requeue({ table: 'callbacks', ids: [dead!.id], reason: 'again' })).body.requeued).toEqual(
      [],
    );

    // No ids: every DEAD one that is left.
    const all = await requeue({ table: 'callbacks', reason: 'the rest' });
    expect(all.body.requeued).toEqual([(await log(second))[0]!.id]);
    await expect.poll(async () => (await log(second))[0]?.status, { timeout: 10_000 }).toBe('DELIVERED');
    expect(received.filter((t) => t === first)).toHaveLength(1);

    const audit = await sql`
      SELECT id, actor, reason, details FROM operator_audit
      WHERE action = 'DEAD_LETTERS_REQUEUE' AND subject_id = 'callbacks' ORDER BY created_at, reason`;
    // Every call is audited, one that requeued nothing too.
    expect(audit.map((a) => a.reason).sort()).toEqual(['again', 'receiver fixed', 'the rest']);
    expect(audit.find((a) => a.reason === 'the rest')?.id).toBe(all.body.auditId);
    expect(audit.find((a) => a.id === named.body.auditId)).toMatchObject({
      actor: 'bootstrap admin token',
      reason: 'receiver fixed',
      details: { requested: [dead!.id, expect.any(String)], requeued: [dead!.id] },
    });
  } finally {
    accepting = false;
    await sql.end();
  }
});
