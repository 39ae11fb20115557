/**
 * Running the work when things go wrong: a retryable failure retried after its back-off, a worker process
 * killed with SIGKILL mid-attempt, two scheduler replicas racing, and a command stream that reconnects.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { advanceBeating, type KillableWorker, spawnWorkerProcess } from '../../../test/killableWorker.ts';
import { completeWith, failFirstThenComplete, failWith, startTestWorker } from '../../../test/testWorker.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
let sql: ReturnType<typeof connectDatabase>;

const oneStep = (name: string, capability: string, extra: Record<string, unknown> = {}) => ({
  name,
  version: '1',
  steps: [
    {
      key: 'only',
      capability,
      capabilityVersion: '1',
      retry: { maxAttempts: 3, initialBackoffMs: 1000, maxBackoffMs: 5000, multiplier: 2 },
      ...extra,
    },
  ],
});

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
  for (const [name, capability, extra] of [
    ['flaky-wf', 'flaky.op', { failurePolicy: 'RETRY_THEN_FAIL_TASK' }],
    ['slow-wf', 'slow.op', {}],
    ['race-wf', 'race.op', {}],
    ['resume-wf', 'resume.op', {}],
    ['ack-wf', 'ack.op', {}],
    ['ack-along-wf', 'ack-along.op', {}],
    ['resend-wf', 'resend.op', {}],
    ['reconnect-wf', 'reconnect.op', {}],
    ['elsewhere-wf', 'elsewhere.op', {}],
    ['full-wf', 'full.op', {}],
    ['cancel-wf', 'cancel.op', {}],
    ['close-wf', 'close.op', { timeouts: { startToCloseMs: 5_000 }, retry: { maxAttempts: 1 } }],
    ['start-wf', 'nobody.op', { timeouts: { scheduleToStartMs: 5_000 }, retry: { maxAttempts: 1 } }],
    ['beat-wf', 'beat.op', { timeouts: { heartbeatMs: 5_000 }, retry: { maxAttempts: 1 } }],
    ['again-wf', 'again.op', {}],
    ['orphan-wf', 'orphan.op', {}],
    ['delayed-wf', 'delayed.op', { startDelayMs: 60_000, timeouts: { scheduleToStartMs: 5_000 } }],
  ] as const) {
    await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: oneStep(name, capability, extra),
    });
  }
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
});
afterAll(async () => {
  for (const worker of workerProcesses) worker.child.kill('SIGKILL');
  await sql.end();
  await h.close();
});

const submit = (workflowName: string, key = newId()) =>
  h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': key },
    body: { workflowName, workflowVersion: '1', name: key },
  });
/** A worker session registered over HTTP offering `<name>.op`, with nothing behind it (nothing is acked). */
const registerBareWorker = async (on: Harness, name: string) =>
  (
    await on.request('POST', '/v1/workers/register', {
      token: workerKey,
      body: {
        instanceId: newId(),
        name,
        nodeId: `node-${name}`,
        capabilities: [{ name: `${name}.op`, version: '1' }],
      },
    })
  ).body.workerId as string;

/** Opens a worker's command stream and keeps its raw text until `close`. */
async function readCommandStream(baseUrl: string, workerId: string, headers: Record<string, string> = {}) {
  const abort = new AbortController();
  const response = await fetch(`${baseUrl}/v1/workers/${workerId}/commands`, {
    headers: { authorization: `Bearer ${workerKey}`, ...headers },
    signal: abort.signal,
  });
  let text = '';
  const reading = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of response.body!) text += decoder.decode(chunk as Uint8Array, { stream: true });
  })().catch(() => {});
  return {
    text: () => text,
    close: async () => {
      abort.abort();
      await reading;
    },
  };
}

/**
 * Two worker sessions of capacity 1 offering `<name>.op`, each holding the START_ATTEMPT of one
 * `<name>-wf` task that nobody acknowledged yet.
 */
async function twoWorkersHoldingACommand(name: string) {
  const register = async (nodeId: string) =>
    (
      await h.request('POST', '/v1/workers/register', {
        token: workerKey,
        body: {
          instanceId: newId(),
          name: nodeId,
          nodeId,
          capabilities: [{ name: `${name}.op`, version: '1' }],
          maxConcurrency: 1,
        },
      })
    ).body.workerId as string;
  const mine = await register(`node-${name}-1`);
  const other = await register(`node-${name}-2`);
  await Promise.all([submit(`${name}-wf`), submit(`${name}-wf`)]);
  const commandsOf = async (workerId: string) =>
    sql<{ id: string; acked_at: Date | null; payload: { attemptId: string; leaseVersion: number } }[]>`
      SELECT id, acked_at, payload FROM worker_command WHERE worker_id = ${workerId} ORDER BY id`;
  await expect.poll(async () => (await commandsOf(mine)).length, { timeout: 10_000 }).toBe(1);
  await expect.poll(async () => (await commandsOf(other)).length, { timeout: 10_000 }).toBe(1);
  const [own] = await commandsOf(mine);
  const [foreign] = await commandsOf(other);
  return { mine, other, own: own!, foreign: foreign!, commandsOf };
}

const workerProcesses: KillableWorker[] = [];
const spawnWorker = (key: string, nodeId: string, capability: string) => {
  const worker = spawnWorkerProcess(h.url, key, nodeId, capability);
  workerProcesses.push(worker);
  return worker;
};

const status = async (id: string) => (await h.request('GET', `/v1/tasks/${id}`, { token: app.apiKey })).body;

describe('failures while running', () => {
  it('retries a retryable failure after its back-off on the injected clock, then succeeds', async () => {
    let calls = 0;
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-flaky',
      capabilities: [{ name: 'flaky.op', version: '1' }],
      handler: failFirstThenComplete({ ok: true }, () => {
        calls += 1;
      }),
    });
    try {
      const created = await submit('flaky-wf');
      const taskId = created.body.task.id;
      await expect
        .poll(async () => (await status(taskId)).execution.steps[0]?.attempt, { timeout: 10_000 })
        .toBe(2);
      expect((await status(taskId)).execution.steps[0].status).toBe('WAITING');
      h.clock.advance(1_001);
      await expect
        .poll(async () => (await status(taskId)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      expect(calls).toBe(2);
      const timeline = (await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: app.apiKey })).body
        .items;
      expect(timeline.find((m: any) => m.kind === 'RETRY_SCHEDULED')).toMatchObject({
        data: { attempt: 2, delayMs: 1000, reason: 'UPSTREAM_TIMEOUT' },
      });
    } finally {
      await worker.stop();
    }
  });

  it('a worker killed with SIGKILL mid-attempt: the step runs again on another worker, one success is recorded, the late success is STALE', async () => {
    const starts: string[] = [];
    // The first worker is its own process, so it can really die.
    const dying = spawnWorker(workerKey, 'node-a', 'slow.op');
    const dyingId = (await dying.next()).workerId as string;
    const created = await submit('slow-wf');
    const taskId = created.body.task.id;
    const lostCommand = (await dying.next()).started as {
      taskId: string;
      attemptId: string;
      attempt: number;
    };
    expect(lostCommand.taskId).toBe(taskId);
    starts.push(`a:${lostCommand.attempt}`);
    await expect
      .poll(async () => (await status(taskId)).execution.steps[0]?.status, { timeout: 10_000 })
      .toBe('RUNNING');
    dying.child.kill('SIGKILL');
    await dying.exited;
    const surviving = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-b',
      capabilities: [{ name: 'slow.op', version: '1' }],
      handler: async (command, report) => {
        starts.push(`b:${command.attempt}`);
        await completeWith({ done: true })(command, report);
      },
    });
    try {
      await advanceBeating(h.clock, 31_000, [surviving]);
      await expect
        .poll(async () => (await status(taskId)).execution.steps[0]?.attempt, { timeout: 10_000 })
        .toBe(2);
      h.clock.advance(1_100);
      await surviving.heartbeat();
      await expect
        .poll(async () => (await status(taskId)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      expect(starts).toEqual(['a:1', 'b:2']);
      // Its success arrives late, e.g. from a copy of the process that was partitioned away.
      const late = await (
        await fetch(`${h.url}/v1/workers/${dyingId}/events:batch`, {
          method: 'POST',
          headers: { authorization: `Bearer ${workerKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            events: [
              {
                attemptId: lostCommand.attemptId,
                leaseVersion: 1,
                eventId: newId(),
                eventType: 'STEP_COMPLETED',
                sourceSeq: 2,
                output: { late: true },
              },
            ],
          }),
        })
      ).json();
      expect((late as any).results[0]).toMatchObject({ ok: false, code: 'STALE_EXECUTION' });
      const completions =
        await sql`SELECT count(*) AS n FROM task_event WHERE task_id = ${taskId} AND type = 'STEP_COMPLETED'`;
      expect(completions[0]!.n).toBe(1n);
      const timeline = (
        await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: app.apiKey })
      ).body.items.map((m: any) => m.kind);
      expect(timeline).toContain('WORKER_LOST');
    } finally {
      h.clock.set(new Date());
      dying.child.kill('SIGKILL');
      await surviving.stop();
    }
  });

  it('a live worker whose heartbeat does not list an attempt started before the TTL has it failed over; a younger one, or a beat without the list, is left alone', async () => {
    const holder = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-unheld',
      capabilities: [{ name: 'orphan.op', version: '1' }],
      handler: async () => {},
    });
    const beat = (body: Record<string, unknown>) =>
      fetch(`${h.url}/v1/workers/${holder.workerId}/heartbeat`, {
        method: 'POST',
        headers: { authorization: `Bearer ${workerKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then((response) => response.status);
    try {
      const taskId = (await submit('orphan-wf')).body.task.id;
      await expect
        .poll(() => holder.received.some((c) => c.taskId === taskId), { timeout: 10_000 })
        .toBe(true);
      // Just started: its START may still be on its way, so an empty list does not fail it.
      expect(await beat({ runtimeState: 'READY', heldAttempts: [] })).toBe(204);
      await advanceBeating(h.clock, 31_000, [holder]);
      // Past the TTL, a beat without the list checks nothing.
      expect(await beat({ runtimeState: 'READY' })).toBe(204);
      expect((await status(taskId)).execution.steps[0]?.attempt).toBe(1);
      // Listed: it is the worker's, left alone.
      const first = holder.received.find((c) => c.taskId === taskId)!;
      expect(await beat({ runtimeState: 'READY', heldAttempts: [first.attemptId] })).toBe(204);
      expect((await status(taskId)).execution.steps[0]?.attempt).toBe(1);
      // Not listed: the worker does not know it (the database lost its end, or its START never came).
      expect(await beat({ runtimeState: 'READY', heldAttempts: [] })).toBe(204);
      await expect
        .poll(async () => (await status(taskId)).execution.steps[0]?.attempt, { timeout: 10_000 })
        .toBe(2);
      const timeline = (
        await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: app.apiKey })
      ).body.items.map((m: any) => m.kind);
      expect(timeline).toContain('ATTEMPT_NOT_ON_WORKER');
      expect(timeline).not.toContain('WORKER_LOST');
    } finally {
      h.clock.set(new Date());
      await holder.stop();
    }
  });

  it('a session that ended while it still held an attempt (the reaper died in between, or a placement raced the end) has it failed over', async () => {
    const stuck = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-orphan-a',
      capabilities: [{ name: 'orphan.op', version: '1' }],
      handler: async () => {},
    });
    let survivor: Awaited<ReturnType<typeof startTestWorker>> | null = null;
    try {
      const taskId = (await submit('orphan-wf')).body.task.id;
      await expect
        .poll(() => stuck.received.some((c) => c.taskId === taskId), { timeout: 10_000 })
        .toBe(true);
      // The session ends, its attempt still open: what a reaper leaves when it dies after ending it.
      await sql`UPDATE worker SET ended_at = ${h.clock.now()} WHERE id = ${stuck.workerId}`;
      survivor = await startTestWorker({
        baseUrl: h.url,
        workerKey,
        nodeId: 'node-orphan-b',
        capabilities: [{ name: 'orphan.op', version: '1' }],
        handler: completeWith({ done: true }),
      });
      await expect
        .poll(async () => (await status(taskId)).execution.steps[0]?.attempt, { timeout: 10_000 })
        .toBe(2);
      h.clock.advance(1_100);
      await survivor.heartbeat();
      await expect
        .poll(async () => (await status(taskId)).task.lifecycleStatus, { timeout: 15_000 })
        .toBe('SUCCEEDED');
      const attempts = await sql`
        SELECT worker_id FROM attempt WHERE task_id = ${taskId} ORDER BY created_at, id`;
      expect(attempts.map((a) => a.worker_id)).toEqual([stuck.workerId, survivor.workerId]);
      const timeline = (
        await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: app.apiKey })
      ).body.items.map((m: any) => m.kind);
      expect(timeline).toContain('WORKER_LOST');
    } finally {
      await stuck.stop();
      await survivor?.stop();
    }
  });

  it('a delayed step waits for its delay on the injected clock, even when workers come and go', async () => {
    const starts: string[] = [];
    const first = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-d1',
      capabilities: [{ name: 'delayed.op', version: '1' }],
      handler: async (command, report) => {
        starts.push(command.taskId);
        await completeWith({ waited: true })(command, report);
      },
    });
    let second: Awaited<ReturnType<typeof startTestWorker>> | null = null;
    try {
      const created = await submit('delayed-wf');
      const taskId = created.body.task.id;
      // A worker registering retries deferred requests; it must not cut a delay short.
      second = await startTestWorker({
        baseUrl: h.url,
        workerKey,
        nodeId: 'node-d2',
        capabilities: [{ name: 'delayed.op', version: '1' }],
        handler: async (command, report) => {
          starts.push(command.taskId);
          await completeWith({ waited: true })(command, report);
        },
      });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(starts).toEqual([]);
      const waiting = await status(taskId);
      expect(waiting.execution.steps[0].status).toBe('READY');
      expect(waiting.task.lifecycleStatus).not.toBe('FAILED');
      const timeline = (await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: app.apiKey })).body
        .items;
      expect(timeline.find((m: any) => m.kind === 'STEP_READY').data).toMatchObject({ delayMs: 60_000 });

      // Both workers beat along, or the lease reaper would call them lost.
      await advanceBeating(h.clock, 61_000, [first, second]);
      await expect
        .poll(async () => (await status(taskId)).task.lifecycleStatus, { timeout: 10_000 })
        .toBe('SUCCEEDED');
      expect(starts).toEqual([taskId]);
    } finally {
      h.clock.set(new Date());
      await first.stop();
      await second?.stop();
    }
  });

  it('two scheduler replicas racing over the same requests create one attempt per step', async () => {
    const replica = await startHarness({ runLoops: true, sharedDatabaseUrl: h.databaseUrl });
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-race',
      capabilities: [{ name: 'race.op', version: '1' }],
      handler: completeWith({ ok: 1 }),
    });
    await worker.heartbeat();
    try {
      await sql`UPDATE worker SET max_concurrency = 100 WHERE id = ${worker.workerId}`;
      const ids = await Promise.all(
        Array.from({ length: 20 }, async () => (await submit('race-wf')).body.task.id as string),
      );
      await expect
        .poll(
          async () =>
            (
              await sql`SELECT count(*) AS n FROM task WHERE id = ANY(${ids}::uuid[]) AND lifecycle_status = 'SUCCEEDED'`
            )[0]!.n,
          { timeout: 20_000 },
        )
        .toBe(20n);
      const attempts =
        await sql`SELECT s.id, count(a.id) AS n FROM step s LEFT JOIN attempt a ON a.step_id = s.id WHERE s.task_id = ANY(${ids}::uuid[]) GROUP BY s.id`;
      expect(attempts.every((r) => r.n === 1n)).toBe(true);
      expect(
        new Set(worker.received.filter((c) => ids.includes(c.taskId)).map((c) => c.attemptId)).size,
      ).toBe(20);
    } finally {
      await worker.stop();
      await replica.server.close();
    }
  });

  it('the command stream resumes after a reconnect without losing or duplicating a command', async () => {
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-resume',
      capabilities: [{ name: 'resume.op', version: '1' }],
      handler: completeWith({ ok: 1 }),
    });
    try {
      const first = await submit('resume-wf');
      await expect
        .poll(async () => (await status(first.body.task.id)).task.lifecycleStatus, { timeout: 10_000 })
        .toBe('SUCCEEDED');
      await worker.reconnect();
      const second = await submit('resume-wf');
      await expect
        .poll(async () => (await status(second.body.task.id)).task.lifecycleStatus, { timeout: 10_000 })
        .toBe('SUCCEEDED');
      const ids = worker.received.map((c) => c.commandId);
      expect(new Set(ids).size).toBe(ids.length);
      expect(worker.received.map((c) => c.taskId).sort()).toEqual(
        [first.body.task.id, second.body.task.id].sort(),
      );
    } finally {
      await worker.stop();
    }
  });

  it("acknowledges commands in a batch: all of them, or none when one is not the worker's", async () => {
    const { mine, other, own, foreign, commandsOf } = await twoWorkersHoldingACommand('ack');

    const refused = await h.request('POST', `/v1/workers/${mine}/commands:ack`, {
      token: workerKey,
      body: { commandIds: [own.id, foreign.id] },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.code).toBe('VALIDATION_FAILED');
    expect(refused.body.detail).toContain(foreign.id);
    expect((await commandsOf(mine))[0]!.acked_at).toBeNull();
    expect((await commandsOf(other))[0]!.acked_at).toBeNull();

    const accepted = await h.request('POST', `/v1/workers/${mine}/commands:ack`, {
      token: workerKey,
      body: { commandIds: [own.id, own.id] },
    });
    expect(accepted.status).toBe(204);
    expect((await commandsOf(mine))[0]!.acked_at).not.toBeNull();
    expect((await commandsOf(other))[0]!.acked_at).toBeNull();
  });

  it("acknowledges commands sent along with events in the same commit; another worker's ids change nothing", async () => {
    const { mine, other, own, foreign, commandsOf } = await twoWorkersHoldingACommand('ack-along');
    const batch = (body: unknown) =>
      h.request('POST', `/v1/workers/${mine}/events:batch`, { token: workerKey, body });

    const empty = await batch({ events: [] });
    expect(empty.status).toBe(400);
    expect(empty.body.code).toBe('VALIDATION_FAILED');

    const reported = await batch({
      events: [
        {
          attemptId: own.payload.attemptId,
          leaseVersion: own.payload.leaseVersion,
          eventId: newId(),
          eventType: 'STEP_STARTED',
          sourceSeq: 1,
        },
      ],
      commandAcks: [own.id, foreign.id],
    });
    expect(reported.status).toBe(200);
    expect(reported.body.results[0].ok).toBe(true);
    expect((await commandsOf(mine))[0]!.acked_at).not.toBeNull();
    expect((await commandsOf(other))[0]!.acked_at).toBeNull();

    // Acknowledgements alone, with no events, are one commit too.
    const alone = await h.request('POST', `/v1/workers/${other}/events:batch`, {
      token: workerKey,
      body: { events: [], commandAcks: [foreign.id] },
    });
    expect(alone.status).toBe(200);
    expect(alone.body.results).toEqual([]);
    expect((await commandsOf(other))[0]!.acked_at).not.toBeNull();
  });

  it('sends an unacknowledged command again after the re-send interval, and stops once it is acknowledged', async () => {
    const workerId = await registerBareWorker(h, 'resend');
    const stream = await readCommandStream(h.url, workerId);
    const copies = (commandId: string) => stream.text().split(`id: ${commandId}\n`).length - 1;
    try {
      await submit('resend-wf');
      await expect
        .poll(() => /id: ([0-9a-f-]{36})\n/.exec(stream.text())?.[1], { timeout: 10_000 })
        .toBeTruthy();
      const commandId = /id: ([0-9a-f-]{36})\n/.exec(stream.text())![1]!;
      expect(copies(commandId)).toBe(1);
      // 31 s pass in two steps, the worker beating after each, so that its last heartbeat is never older
      // than its 30 s TTL when the lease reaper (every 2 s) looks.
      const beat = () => h.request('POST', `/v1/workers/${workerId}/heartbeat`, { token: workerKey });
      const advance = async () => {
        for (const ms of [16_000, 15_000]) {
          h.clock.advance(ms);
          await beat();
        }
      };
      await advance();
      await expect.poll(() => copies(commandId), { timeout: 5_000 }).toBe(2);
      const acked = await h.request('POST', `/v1/workers/${workerId}/commands:ack`, {
        token: workerKey,
        body: { commandIds: [commandId] },
      });
      expect(acked.status).toBe(204);
      await advance();
      await new Promise((r) => setTimeout(r, 2_500));
      expect(copies(commandId)).toBe(2);
    } finally {
      h.clock.set(new Date());
      await stream.close();
    }
  });

  it('a reconnecting worker gets at once a command whose id is below its Last-Event-ID (committed out of order by another replica)', async () => {
    const workerId = await registerBareWorker(h, 'reconnect');
    // The command is committed while the worker has no stream open...
    await submit('reconnect-wf');
    await expect
      .poll(async () => (await sql`SELECT id FROM worker_command WHERE worker_id = ${workerId}`).length, {
        timeout: 10_000,
      })
      .toBe(1);
    const commandId = (
      await sql<{ id: string }[]>`SELECT id FROM worker_command WHERE worker_id = ${workerId}`
    )[0]!.id;
    // ...and the worker comes back holding a later command id, as when the command it missed was
    // written by a replica whose commit landed after one with a higher id reached the worker.
    const stream = await readCommandStream(h.url, workerId, { 'last-event-id': newId() });
    try {
      // The injected clock stands still: a command held back until the re-send interval never comes.
      await expect.poll(() => stream.text().includes(`id: ${commandId}\n`), { timeout: 3_000 }).toBe(true);
    } finally {
      await stream.close();
    }
  });

  it("a command written by another replica reaches the worker's stream through the replicas' wake-up, not the poll", async () => {
    // The replica holding the stream reads open commands only every ten minutes on its own.
    const holder = await startHarness({
      sharedDatabaseUrl: h.databaseUrl,
      settings: { commandPollIntervalMs: 600_000 },
    });
    let stream: Awaited<ReturnType<typeof readCommandStream>> | null = null;
    try {
      const workerId = await registerBareWorker(holder, 'elsewhere');
      const open = await readCommandStream(holder.url, workerId);
      stream = open;
      await expect.poll(() => open.text().includes(': connected'), { timeout: 5_000 }).toBe(true);
      // Created and placed by the other replica (`h`), whose hub holds no stream of this worker.
      const created = await submit('elsewhere-wf');
      await expect.poll(() => open.text().includes('event: START_ATTEMPT'), { timeout: 5_000 }).toBe(true);
      expect(open.text()).toContain(`"taskId":"${created.body.task.id}"`);
    } finally {
      await stream?.close();
      await holder.server.close();
    }
  });

  it('a step waiting for a full worker starts once the worker frees capacity, not after the retry interval', async () => {
    let firstId: string | undefined;
    let secondId: string | undefined;
    // The second step was put back: no worker could take it (the only one is at its limit).
    const secondPutBack = async () =>
      secondId !== undefined &&
      (
        await sql`SELECT 1 FROM scheduling_request
                  WHERE task_id = ${secondId} AND status = 'PENDING' AND reasons <> '[]'::jsonb`
      ).length === 1;
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-full',
      maxConcurrency: 1,
      capabilities: [{ name: 'full.op', version: '1' }],
      handler: async (command, report) => {
        // The first attempt holds the one slot until the second step has been put back for it.
        if (command.taskId === firstId) await expect.poll(secondPutBack, { timeout: 10_000 }).toBe(true);
        await completeWith({ ok: 1 })(command, report);
      },
    });
    try {
      firstId = (await submit('full-wf')).body.task.id;
      secondId = (await submit('full-wf')).body.task.id;
      // The injected clock stands still, so the put-back request's retry time never comes on its own.
      for (const id of [firstId, secondId])
        await expect
          .poll(async () => (await status(id!)).task.lifecycleStatus, { timeout: 10_000 })
          .toBe('SUCCEEDED');
    } finally {
      await worker.stop();
    }
  });

  it('cancelling a running task sends CANCEL_ATTEMPT, stays CANCELLING, and ends CANCELLED when the attempt stops', async () => {
    const cancels: string[] = [];
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-cancel',
      capabilities: [{ name: 'cancel.op', version: '1' }],
      handler: async (command, report) => {
        await report([
          {
            attemptId: command.attemptId,
            leaseVersion: 1,
            eventId: newId(),
            eventType: 'STEP_STARTED',
            sourceSeq: 1,
          },
        ]);
      },
      onCommand: (command) => {
        if (command.type === 'CANCEL_ATTEMPT') cancels.push(command.attemptId);
      },
    });
    try {
      const created = await submit('cancel-wf');
      const taskId = created.body.task.id;
      await expect
        .poll(async () => (await status(taskId)).execution.steps[0]?.status, { timeout: 10_000 })
        .toBe('RUNNING');
      // The worker's slot is taken while its attempt runs, and given back once the attempt ends.
      const running = async () =>
        (
          (await h.request('GET', '/v1/workers', { token: app.apiKey })).body as {
            id: string;
            runningAttempts: number;
          }[]
        ).find((w) => w.id === worker.workerId)?.runningAttempts;
      expect(await running()).toBe(1);
      const cancelled = await h.request('POST', `/v1/tasks/${taskId}:cancel`, {
        token: app.apiKey,
        body: { reason: 'changed my mind' },
      });
      expect(cancelled.body.execution.status).toBe('CANCELLING');
      const attemptId = worker.received.find((c) => c.taskId === taskId)!.attemptId;
      await expect.poll(() => cancels, { timeout: 10_000 }).toContain(attemptId);
      expect((await status(taskId)).task.lifecycleStatus).toBe('RUNNING');
      await worker.report([
        {
          attemptId,
          leaseVersion: 1,
          eventId: newId(),
          eventType: 'STEP_FAILED',
          sourceSeq: 2,
          error: { category: 'CANCELLED', code: 'CANCELLED', retryable: false },
        },
      ]);
      await expect
        .poll(async () => (await status(taskId)).execution.status, { timeout: 10_000 })
        .toBe('CANCELLED');
      expect((await status(taskId)).task.lifecycleStatus).toBe('CANCELLED');
      expect(await running()).toBe(0);
    } finally {
      await worker.stop();
    }
  });

  it('a cancel whose attempt never stops ends CANCELLED when the grace period runs out', async () => {
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-cancel-deaf',
      capabilities: [{ name: 'cancel.op', version: '1' }],
      handler: async (command, report) => {
        await report([
          {
            attemptId: command.attemptId,
            leaseVersion: 1,
            eventId: newId(),
            eventType: 'STEP_STARTED',
            sourceSeq: 1,
          },
        ]);
      },
    });
    try {
      const created = await submit('cancel-wf');
      const taskId = created.body.task.id;
      await expect
        .poll(async () => (await status(taskId)).execution.steps[0]?.status, { timeout: 10_000 })
        .toBe('RUNNING');
      await h.request('POST', `/v1/tasks/${taskId}:cancel`, { token: app.apiKey });
      await advanceBeating(h.clock, 30_001, [worker]);
      await expect
        .poll(async () => (await status(taskId)).execution.status, { timeout: 10_000 })
        .toBe('CANCELLED');
    } finally {
      h.clock.set(new Date());
      await worker.stop();
    }
  });

  it.each([
    ['start-to-close', 'close-wf', 'close.op', true, 'START_TO_CLOSE_TIMEOUT'],
    ['heartbeat', 'beat-wf', 'beat.op', true, 'HEARTBEAT_TIMEOUT'],
    ['schedule-to-start', 'start-wf', 'nobody.op', false, 'SCHEDULE_TO_START_TIMEOUT'],
  ])(
    'the %s timeout fires under the injected clock',
    async (_name, workflow, capability, withWorker, code) => {
      const worker = withWorker
        ? await startTestWorker({
            baseUrl: h.url,
            workerKey,
            nodeId: `node-${capability}`,
            capabilities: [{ name: capability, version: '1' }],
            handler: async (command, report) => {
              await report([
                {
                  attemptId: command.attemptId,
                  leaseVersion: 1,
                  eventId: newId(),
                  eventType: 'STEP_STARTED',
                  sourceSeq: 1,
                },
              ]);
            },
          })
        : null;
      try {
        const created = await submit(workflow);
        const taskId = created.body.task.id;
        if (worker)
          await expect
            .poll(async () => (await status(taskId)).execution.steps[0]?.status, { timeout: 10_000 })
            .toBe('RUNNING');
        h.clock.advance(5_001);
        await worker?.heartbeat();
        await expect
          .poll(async () => (await status(taskId)).task.lifecycleStatus, { timeout: 10_000 })
          .toBe('FAILED');
        const final = await status(taskId);
        expect(final.execution.steps[0].error).toMatchObject({ category: 'TIMEOUT', code });
        // The task's failure carries the step's words for people, not just its code.
        expect(final.task.failure).toMatchObject({
          code,
          failedStepId: 'only',
          userMessage: expect.stringMatching(/^Step only timed out/),
        });
      } finally {
        h.clock.set(new Date());
        await worker?.stop();
      }
    },
  );

  it('retrying a failed task starts execution #2; late facts of #1 are STALE', async () => {
    const worker = await startTestWorker({
      baseUrl: h.url,
      workerKey,
      nodeId: 'node-again',
      capabilities: [{ name: 'again.op', version: '1' }],
      handler: async (command, report) => {
        const run =
          worker.received.filter((c) => c.taskId === command.taskId).length === 1
            ? failWith({ category: 'INPUT', code: 'BAD_ZIP', retryable: false })
            : completeWith({ ok: true });
        await run(command, report);
      },
    });
    try {
      const created = await submit('again-wf');
      const taskId = created.body.task.id;
      await expect
        .poll(async () => (await status(taskId)).task.lifecycleStatus, { timeout: 10_000 })
        .toBe('FAILED');
      const first = worker.received.find((c) => c.taskId === taskId)!;
      const retried = await h.request('POST', `/v1/tasks/${taskId}:retry`, { token: app.apiKey });
      expect(retried.status).toBe(201);
      expect(retried.body.execution).toMatchObject({ number: 2, status: 'CREATED' });
      expect(retried.body.task.currentExecutionId).not.toBe(created.body.execution.id);
      await expect
        .poll(async () => (await status(taskId)).task.lifecycleStatus, { timeout: 10_000 })
        .toBe('SUCCEEDED');
      const late = (await worker.report([
        {
          attemptId: first.attemptId,
          leaseVersion: 1,
          eventId: newId(),
          eventType: 'STEP_PROGRESS',
          sourceSeq: 2,
        },
      ])) as any;
      expect(late.results[0]).toMatchObject({ ok: false, code: 'STALE_EXECUTION' });
      const running = await submit('again-wf');
      await expect
        .poll(async () => (await status(running.body.task.id)).task.lifecycleStatus, { timeout: 10_000 })
        .toBe('FAILED');
      const notFinished = await h.request('POST', `/v1/tasks/${created.body.task.id}:retry`, {
        token: app.apiKey,
      });
      expect(notFinished.status).toBe(201);
    } finally {
      await worker.stop();
    }
  });
});
