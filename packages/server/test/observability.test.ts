/**
 * The metrics of docs/observability.md on a real server: a task's run feeds submit→start, step
 * durations and the phases of its fact transactions; the backlog and STALE gauges are exported; browsers' commit→visible reports feed their
 * histogram, and bad reports are refused with a 4xx problem and change nothing. The alert rules file
 * parses, and every metric its expressions name is one the server exports.
 */
import { readFileSync } from 'node:fs';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { completeWith, startTestWorker } from '../../../test/testWorker.ts';
import { TaskStore, VisibilityReporter } from '../../client/src/index.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let worker: Awaited<ReturnType<typeof startTestWorker>>;

beforeAll(async () => {
  h = await startHarness({
    runLoops: true,
    settings: { visibilityReportRate: { perSecond: 0.001, burst: 3 } },
  });
  app = await h.createApplication();
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'observed',
      version: '1',
      steps: [{ key: 'echo', capability: 'observe.echo', capabilityVersion: '1', inputMapping: {} }],
    },
  });
  expect(published.status, JSON.stringify(published.body)).toBe(201);
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-observed',
    capabilities: [{ name: 'observe.echo', version: '1' }],
    handler: completeWith({ ok: true }),
  });
}, 60_000);
afterAll(async () => {
  await worker?.stop();
  await h?.close();
});

const metrics = async () => (await fetch(`${h.url}/metrics`)).text();
/** The value of one sample line (`name{labels} value`), or undefined when it is not exported. */
const sample = (text: string, series: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

describe('task metrics', () => {
  it('a task run observes submit→start and the step duration', async () => {
    const before = await metrics();
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: 'observed', workflowVersion: '1', name: 'observed task' },
    });
    expect(created.status).toBe(201);
    await expect
      .poll(
        async () =>
          (await h.request('GET', `/v1/tasks/${created.body.task.id}`, { token: app.apiKey })).body.task
            .lifecycleStatus,
        { timeout: 15_000 },
      )
      .toBe('SUCCEEDED');
    const after = await metrics();
    const count = (text: string, series: string) => sample(text, series) ?? 0;
    expect(count(after, 'tdp_task_submit_to_start_seconds_count')).toBe(
      count(before, 'tdp_task_submit_to_start_seconds_count') + 1,
    );
    expect(count(after, 'tdp_step_duration_seconds_count{status="SUCCEEDED"}')).toBe(
      count(before, 'tdp_step_duration_seconds_count{status="SUCCEEDED"}') + 1,
    );
    // Its facts were committed in transactions: each observed its phases, a read-write one all three.
    const grew = (phase: string) =>
      count(after, `tdp_fact_transaction_seconds_count{phase="${phase}"}`) -
      count(before, `tdp_fact_transaction_seconds_count{phase="${phase}"}`);
    expect(grew('work')).toBeGreaterThan(0);
    expect(grew('queue')).toBe(grew('work'));
    expect(grew('commit')).toBeGreaterThanOrEqual(grew('work'));
    expect(sample(after, 'tdp_fact_transaction_seconds_sum{phase="commit"}')).toBeGreaterThan(0);
    // Its realtime messages went out through the hand-off, each timed from its commit.
    expect(count(after, 'tdp_realtime_handoff_seconds_count')).toBeGreaterThan(
      count(before, 'tdp_realtime_handoff_seconds_count'),
    );
  });

  it('exports the backlogs, their oldest age, DEAD rows and STALE steps', async () => {
    // One of the task's domain events given up on, as the outbox loop does after its retries.
    await h.server.sql`
      UPDATE outbox_event SET status = 'DEAD' WHERE id = (SELECT id FROM outbox_event LIMIT 1)`;
    const text = await metrics();
    for (const table of ['outbox', 'realtime', 'callbacks']) {
      expect(sample(text, `tdp_backlog_rows{table="${table}",status="PENDING"}`)).toBeGreaterThanOrEqual(0);
      expect(sample(text, `tdp_backlog_oldest_age_seconds{table="${table}"}`)).toBeGreaterThanOrEqual(0);
    }
    const [dead] = await h.server.sql`SELECT count(*)::int AS n FROM outbox_event WHERE status = 'DEAD'`;
    expect(dead!.n).toBeGreaterThan(0);
    expect(sample(text, 'tdp_backlog_rows{table="outbox",status="DEAD"}')).toBe(dead!.n);
    expect(sample(text, 'tdp_steps_stale')).toBe(0);
  });
});

describe('POST /v1/telemetry/visibility', () => {
  const visible = async () => sample(await metrics(), 'tdp_state_commit_to_visible_seconds_count') ?? 0;
  let userToken: string;
  beforeAll(async () => {
    userToken = (
      await h.request('POST', '/v1/user-tokens', { token: app.apiKey, body: { userId: 'viewer-1' } })
    ).body.token;
  });
  /** `null`: no Authorization header. */
  const report = (body: unknown, token: string | null = userToken) =>
    h.request('POST', '/v1/telemetry/visibility', token === null ? { body } : { token, body });

  it('feeds the commit→visible histogram with a user token', async () => {
    const before = await visible();
    const accepted = await report({ commitToVisibleSeconds: [0.02, 0.3] });
    expect(accepted.status).toBe(204);
    expect(await visible()).toBe(before + 2);
  });

  it('refuses bad reports with a 4xx problem and observes nothing', async () => {
    const before = await visible();
    const refusals: [unknown, string | null, number, string][] = [
      [{ commitToVisibleSeconds: [0.1] }, null, 401, 'UNAUTHENTICATED'],
      [{ commitToVisibleSeconds: [0.1] }, app.apiKey, 401, 'UNAUTHENTICATED'],
      [{ commitToVisibleSeconds: [-1] }, userToken, 400, 'VALIDATION_FAILED'],
      [{ commitToVisibleSeconds: [99_999] }, userToken, 400, 'VALIDATION_FAILED'],
      [{ commitToVisibleSeconds: [] }, userToken, 400, 'VALIDATION_FAILED'],
      [{ commitToVisibleSeconds: Array(51).fill(0.1) }, userToken, 400, 'VALIDATION_FAILED'],
      [{ commitToVisibleSeconds: [0.1], taskId: 'x' }, userToken, 400, 'VALIDATION_FAILED'],
      [{ commitToVisibleSeconds: ['0.1'] }, userToken, 400, 'VALIDATION_FAILED'],
    ];
    for (const [body, token, status, code] of refusals) {
      const refused = await report(body, token);
      expect([refused.status, refused.body?.code], JSON.stringify(body)).toEqual([status, code]);
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
    }
    expect(await visible()).toBe(before);
  });

  it("receives the client store's sampled reports of live messages (not of snapshots)", async () => {
    const token = (
      await h.request('POST', '/v1/user-tokens', { token: app.apiKey, body: { userId: 'viewer-3' } })
    ).body.token;
    let sampled = 0;
    const reporter = new VisibilityReporter({
      baseUrl: h.url,
      token: () => token,
      sampleRate: 0.5,
      // Every other message is measured.
      random: () => (sampled++ % 2 === 0 ? 0 : 0.9),
    });
    const store = new TaskStore({ onVisible: reporter.observe });
    const message = (taskVersion: number, secondsAgo: number) =>
      ({
        kind: 'task.summary',
        taskId: 't1',
        workflowId: 'w1',
        taskVersion: String(taskVersion),
        title: 't',
        lifecycleStatus: 'RUNNING',
        businessStatus: null,
        health: 'HEALTHY',
        progressPercent: null,
        error: null,
        createdAt: new Date(Date.now() - 60_000).toISOString(),
        updatedAt: new Date(Date.now() - secondsAgo * 1000).toISOString(),
        startedAt: null,
        finishedAt: null,
      }) as const;
    store.beginSnapshot();
    store.endSnapshot([message(1, 30)]);
    for (const version of [2, 3, 4, 5]) store.receive(message(version, 0.25));
    store.receive(message(3, 0.25)); // older than shown: changes nothing, not measured
    const before = await visible();
    await reporter.flush();
    reporter.stop();
    expect(await visible()).toBe(before + 2);
  });

  it('limits how often one user reports', async () => {
    const other = (
      await h.request('POST', '/v1/user-tokens', { token: app.apiKey, body: { userId: 'viewer-2' } })
    ).body.token;
    const statuses: number[] = [];
    for (let i = 0; i < 4; i += 1)
      statuses.push((await report({ commitToVisibleSeconds: [0.1] }, other)).status);
    expect(statuses).toEqual([204, 204, 204, 429]);
  });
});

describe('docs/alerts/tdp.rules.yml', () => {
  it('parses, and every expression names metrics the server exports', async () => {
    const rules = parse(
      readFileSync(new URL('../../../docs/alerts/tdp.rules.yml', import.meta.url), 'utf8'),
    ) as {
      groups: { name: string; rules: { alert: string; expr: string; for?: string }[] }[];
    };
    const text = await metrics();
    const exported = new Set(
      text
        .split('\n')
        .filter((l) => l.startsWith('# TYPE '))
        .map((l) => l.split(' ')[2]!),
    );
    const all = rules.groups.flatMap((g) => g.rules);
    expect(all.length).toBeGreaterThanOrEqual(8);
    for (const rule of all) {
      expect(rule.alert).toMatch(/^Tdp[A-Za-z]+$/);
      const names = rule.expr.match(/\btdp_[a-z0-9_]+/g) ?? [];
      expect(names.length, rule.alert).toBeGreaterThan(0);
      for (const name of names) {
        const metric = name.replace(/_(bucket|count|sum)$/, '');
        expect(exported.has(metric) || exported.has(name), `${rule.alert}: ${name}`).toBe(true);
      }
    }
  });
});
