/**
 * One name for a step's key (`stepKey`) and one for an attempt's id (`attemptId`) wherever another object
 * refers to them: the execution context, event answers, the task's events, REST steps, heartbeat answers
 * and the realtime detail. The old names (`stepId`, `executionId`) stay, with the same values, for a
 * deprecation period (docs/architecture.md, "Wire versions and deprecations").
 */
import type { Centrifuge } from 'centrifuge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followTaskDetail } from '../../../test/followDetail.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { coordinator } from '../../../test/statusFixture.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let c: Awaited<ReturnType<typeof coordinator>>;
let sql: ReturnType<typeof connectDatabase>;
const clients: Centrifuge[] = [];
const owner = 'names-owner';

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  c = await coordinator(h);
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await sql.end();
  await h.close();
});

describe('a step and an attempt', () => {
  it('are named stepKey and attemptId on every surface, the deprecated names still carrying the same values', async () => {
    const taskId = (await c.createWorkflow({ ownerId: owner })).tasks[0]!.taskId;
    const details = await followTaskDetail(h, c.app.apiKey, owner, taskId, clients);
    const ctx = (await c.activate(taskId, '01_prepare')) as Awaited<ReturnType<typeof c.activate>> &
      Record<string, unknown>;
    const attemptId = ctx.executionId;
    expect(ctx).toMatchObject({ stepKey: '01_prepare', stepId: '01_prepare', attemptId });

    const reported = await c.report(ctx, c.event(ctx));
    expect(reported.body).toMatchObject({ stepKey: '01_prepare', stepId: '01_prepare' });

    const events = (await c.call('GET', `/v1/tasks/${taskId}/events`)).body.items as Record<
      string,
      unknown
    >[];
    expect(events.find((e) => e.eventType === 'STEP_STARTED')).toMatchObject({
      stepKey: '01_prepare',
      stepId: '01_prepare',
      attemptId,
      executionId: attemptId,
    });

    const step = (await c.task(taskId)).execution.steps.find((s: { key: string }) => s.key === '01_prepare');
    expect(step).toMatchObject({ attemptId, executionId: attemptId });

    const beat = await c.call('POST', '/v1/task-heartbeats:batch', {
      heartbeats: [{ executionHandle: ctx.executionHandle, heartbeatSeq: 1 }],
    });
    expect(beat.body.results[0]).toMatchObject({ attemptId, executionId: attemptId, outcome: 'ACCEPTED' });

    await expect
      .poll(() => details.find((d) => d.triggerEvent?.eventType === 'STEP_STARTED'), { timeout: 10_000 })
      .toBeDefined();
    const live = details.find((d) => d.triggerEvent.eventType === 'STEP_STARTED');
    expect(live.triggerEvent).toMatchObject({ stepKey: '01_prepare', stepId: '01_prepare', attemptId });
    expect(live.state.steps.find((s: { stepKey: string }) => s.stepKey === '01_prepare')).toMatchObject({
      stepId: '01_prepare',
      attemptId,
      executionId: attemptId,
    });
  });

  it('is named stepKey in the replay of an answer stored before the name was added', async () => {
    const { ctx } = await c.runningContext();
    const body = c.event(ctx);
    expect((await c.report(ctx, body)).status).toBe(200);
    // As an older server stored it: no stepKey.
    await sql`UPDATE event_dedup SET result = result - 'stepKey' WHERE event_id = ${body.eventId}`;
    const again = await c.report(ctx, body);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ duplicate: true, stepKey: '01_prepare', stepId: '01_prepare' });
  });
});
