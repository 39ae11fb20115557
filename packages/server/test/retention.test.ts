/**
 * Retention on an injected clock (docs/retention.md): a month of finished tasks, the sweep archives and
 * deletes exactly those past the window, a running task is never touched, a crash between the archive
 * and the delete loses and duplicates nothing, an unwritable archive deletes nothing, archived tasks
 * answer 410, and `tdp archive restore` brings one back row for row.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { FileArchive } from '../src/adapters/outbound/archive/fileArchive.ts';
import { PostgresRetentionStore } from '../src/adapters/outbound/postgres/retentionStore.ts';
import type { ArchiveWriter, RetentionObserver, TableLines } from '../src/core/retention/ports.ts';
import { type SweepDeps, sweepOnce } from '../src/core/retention/sweep.ts';
import { defaultSettings, restoreArchivedTask } from '../src/main.ts';

const day = 86_400_000;
const cli = new URL('../../cli/src/main.ts', import.meta.url).pathname;

/** Runs `tdp <args>` from the sources against the test database and archive. */
function tdp(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--conditions=@tdp/source', '--import', 'tsx', cli, ...args], {
      env: { ...process.env, DATABASE_URL: h.databaseUrl, TDP_ARCHIVE_DIR: archiveDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk));
    child.once('close', (code) => resolve({ code, output }));
  });
}
let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let store: PostgresRetentionStore;
let archiveDir: string;
const failures: string[] = [];
/** Task id → its history before any sweep (every table's rows as row_to_json). */
const before = new Map<string, TableLines[]>();
const finishedTasks: { id: string; finishedDay: number }[] = [];
let runningTaskId: string;
/** Idempotency records before any sweep: all of them, and those older than its 30-day window. */
let idempotencyBefore: { old: number; total: number };

const observer: RetentionObserver = {
  swept: () => {},
  archived: () => {},
  oldestRowAge: () => {},
  failed: (reason) => failures.push(reason),
};

function sweepDeps(archive: ArchiveWriter | null, settings: Partial<SweepDeps['settings']> = {}): SweepDeps {
  return {
    store,
    archive,
    clock: h.clock,
    ids: { newId },
    observer,
    settings: { ...defaultSettings.retention, scanBlocks: 10_000, ...settings },
  };
}

async function createTask(): Promise<string> {
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': `k-${newId()}` },
    body: {
      workflowName: 'zip-clean-watermark',
      workflowVersion: '1',
      name: 'n',
      input: { sourceZip: 'asset://a' },
    },
  });
  expect(created.status).toBe(201);
  return created.body.task.id;
}

const nonEmpty = (tables: TableLines[]) =>
  Object.fromEntries(tables.filter((t) => t.lines.length > 0).map((t) => [t.table, t.lines]));
const archivedIds = async () =>
  (await h.server.sql<{ task_id: string }[]>`SELECT task_id FROM archived_task ORDER BY task_id`).map(
    (r) => r.task_id,
  );

beforeAll(async () => {
  h = await startHarness();
  store = new PostgresRetentionStore(h.server.sql);
  archiveDir = await mkdtemp(join(tmpdir(), 'tdp-archive-'));
  app = await h.createApplication();
  expect(
    (await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() })).status,
  ).toBe(201);
  // A month of tasks: one a day, each cancelled the day it was created; one more still running.
  const start = Date.now() - 45 * day;
  h.clock.set(new Date(start));
  runningTaskId = await createTask();
  for (let d = 0; d < 30; d += 1) {
    h.clock.set(new Date(start + d * day + 3_600_000));
    const id = await createTask();
    const cancelled = await h.request('POST', `/v1/tasks/${id}:cancel`, { token: app.apiKey, body: {} });
    expect(cancelled.body.task.lifecycleStatus).toBe('CANCELLED');
    finishedTasks.push({ id, finishedDay: d });
  }
  // The running task once finished long ago (a retry started it again): its old end must not count.
  await h.server.sql`UPDATE task SET finished_at = ${new Date(start)} WHERE id = ${runningTaskId}`;
  // Families: a finished child of the running task, and a finished parent of a task still in its window.
  await h.server.sql`UPDATE task SET parent_task_id = ${runningTaskId} WHERE id = ${finishedTasks[1]!.id}`;
  await h.server
    .sql`UPDATE task SET parent_task_id = ${finishedTasks[2]!.id} WHERE id = ${finishedTasks[20]!.id}`;
  // Each finished task left its owner an offline notification: part of its history, archived with it.
  await h.server.sql`
    INSERT INTO user_notification (id, tenant_id, application_id, user_id, task_id, task_version,
      notification_type, severity, message, requires_action, available_at, created_at)
    SELECT gen_random_uuid(), tenant_id, application_id, 'olga', id, version, 'TASK_FAILED', 'ERROR', name,
      false, updated_at, updated_at
    FROM task WHERE id = ANY(${finishedTasks.map((t) => t.id)}::uuid[])`;
  for (const id of [runningTaskId, ...finishedTasks.map((t) => t.id)])
    before.set(id, await store.taskHistory([id]));
  // Now: day 45. With 30 days of retention, tasks finished on days 0–14 are due.
  h.clock.set(new Date(start + 45 * day));
  const [counts] = await h.server.sql<{ old: number; total: number }[]>`
    SELECT count(*) FILTER (WHERE created_at < ${new Date(start + 15 * day)})::int AS old,
           count(*)::int AS total FROM idempotency`;
  idempotencyBefore = counts!;
  expect(idempotencyBefore.old).toBeGreaterThan(0);
});

afterAll(async () => {
  await h?.close();
});

/** Finished before the window (days 0–14), but not the child of a running task nor a parent with a child left. */
const inFamily = (t: { finishedDay: number }) => t.finishedDay === 1 || t.finishedDay === 2;
const due = () => finishedTasks.filter((t) => t.finishedDay < 15 && !inFamily(t)).map((t) => t.id);
const kept = () => finishedTasks.filter((t) => t.finishedDay >= 15 || inFamily(t)).map((t) => t.id);

describe('retention sweep', () => {
  it('an unwritable archive directory stops the sweep with an alert and deletes nothing', async () => {
    const notADirectory = join(archiveDir, 'a-file');
    await writeFile(notADirectory, 'x');
    const round = sweepOnce(
      sweepDeps(new FileArchive(join(notADirectory, 'archive')), { archiveBatchTasks: 4 }),
    );
    await expect(round).rejects.toThrow(/ENOTDIR/);
    expect(failures).toEqual(['ARCHIVE']);
    expect(await archivedIds()).toEqual([]);
    for (const [id, history] of before)
      expect(nonEmpty(await store.taskHistory([id]))).toEqual(nonEmpty(history));
    // The batch it claimed is taken over once its claim expires.
    h.clock.advance(defaultSettings.retention.batchClaimMs + 1);
  });

  it('a crash between the archive and the delete: the rerun archives each row once and loses none', async () => {
    failures.length = 0;
    const real = new FileArchive(archiveDir);
    const crashing: ArchiveWriter = {
      write: (batch, tables) => real.write(batch, tables),
      read: async () => {
        throw new Error('killed after the files were written');
      },
    };
    await expect(sweepOnce(sweepDeps(crashing, { archiveBatchTasks: 4 }))).rejects.toThrow(/killed/);
    expect(await archivedIds()).toEqual([]);
    // It took over the batch the unwritable directory left (4 tasks), wrote it, and died before the delete.
    const [pending] = await h.server.sql`SELECT count(*)::int AS n FROM retention_batch_task`;
    expect(pending!.n).toBe(4);
    expect((await readdir(archiveDir)).filter((name) => name !== 'a-file')).toHaveLength(1);

    h.clock.advance(defaultSettings.retention.batchClaimMs + 1);
    for (let round = 0; round < 20; round += 1) {
      const report = await sweepOnce(sweepDeps(real, { archiveBatchTasks: 4 }));
      if (report.archivedTasks === 0 && !report.more) break;
    }
    expect(failures).toEqual(['ARCHIVE']);
    // Exactly the tasks past the window; the younger ones and the running one are as they were.
    expect(await archivedIds()).toEqual([...due()].sort());
    for (const id of due()) expect(nonEmpty(await store.taskHistory([id]))).toEqual({});
    const notificationsLeft = await h.server.sql`
      SELECT task_id FROM user_notification WHERE task_id = ANY(${due()}::uuid[])`;
    expect(notificationsLeft).toEqual([]);
    for (const id of [...kept(), runningTaskId])
      expect(nonEmpty(await store.taskHistory([id]))).toEqual(nonEmpty(before.get(id)!));
    const [left] = await h.server.sql`SELECT count(*)::int AS n FROM retention_batch`;
    expect(left!.n).toBe(0);

    // Every archived row is in the archive exactly once (the crashed batch's files were rewritten).
    const inArchive = new Map<string, string[]>();
    for (const archiveDay of await readdir(archiveDir)) {
      if (archiveDay === 'a-file') continue;
      for (const batch of await readdir(join(archiveDir, archiveDay))) {
        const folder = join(archiveDir, archiveDay, batch);
        // Every tenant's history, private to the server's user.
        expect((await stat(join(archiveDir, archiveDay))).mode & 0o777).toBe(0o700);
        expect((await stat(folder)).mode & 0o777).toBe(0o700);
        expect((await stat(join(folder, 'manifest.json'))).mode & 0o777).toBe(0o600);
        const manifest = JSON.parse(await readFile(join(folder, 'manifest.json'), 'utf8'));
        for (const entry of manifest.tables) {
          if (!entry.file) continue;
          const lines = gunzipSync(await readFile(join(folder, entry.file)))
            .toString()
            .trimEnd()
            .split('\n');
          expect(lines).toHaveLength(entry.rows);
          inArchive.set(entry.table, [...(inArchive.get(entry.table) ?? []), ...lines]);
        }
      }
    }
    const expected = new Map<string, string[]>();
    for (const id of due())
      for (const { table, lines } of before.get(id)!)
        expected.set(table, [...(expected.get(table) ?? []), ...lines]);
    for (const [table, lines] of expected)
      expect([...(inArchive.get(table) ?? [])].sort()).toEqual([...lines].sort());
  });

  it('reads of an archived task answer 410 TASK_ARCHIVED to its application, 404 to others', async () => {
    const id = due()[0]!;
    for (const path of [`/v1/tasks/${id}`, `/v1/tasks/${id}/events`, `/v1/tasks/${id}/timeline`]) {
      const read = await h.request('GET', path, { token: app.apiKey });
      expect(read.status, path).toBe(410);
      expect(read.headers.get('content-type')).toContain('application/problem+json');
      expect(read.body.code).toBe('TASK_ARCHIVED');
      expect(read.body.detail).toContain('tdp archive restore');
      expect(read.body.detail).not.toContain(archiveDir);
    }
    // The dashboard (operators) too.
    const login = await fetch(`${h.url}/dashboard/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: h.adminToken }),
    });
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
    const dashboard = await h.request('GET', `/dashboard/api/tasks/${id}`, { headers: { cookie } });
    expect(dashboard.status).toBe(410);
    expect(dashboard.body.code).toBe('TASK_ARCHIVED');
    const stranger = await h.createApplication();
    expect((await h.request('GET', `/v1/tasks/${id}`, { token: stranger.apiKey })).status).toBe(404);
    expect((await h.request('GET', `/v1/tasks/${kept()[0]}`, { token: app.apiKey })).status).toBe(200);
  });

  it('restores one archived task byte for byte; the rest of its batch stays archived', async () => {
    const id = due()[2]!;
    // Through the real command, as an operator runs it.
    const refused = await tdp(['archive', 'restore']);
    expect(refused.code).toBe(2);
    const restore = await tdp(['archive', 'restore', '--task', id]);
    expect(restore.code, restore.output).toBe(0);
    const report = JSON.parse(restore.output);
    expect(report).toMatchObject({ taskId: id, restored: { task: 1 } });
    expect(nonEmpty(await store.taskHistory([id]))).toEqual(nonEmpty(before.get(id)!));
    expect(before.get(id)!.find((t) => t.table === 'user_notification')?.lines).toHaveLength(1);
    expect((await h.request('GET', `/v1/tasks/${id}`, { token: app.apiKey })).status).toBe(200);
    // Its batch-mates stay archived.
    expect(await archivedIds()).not.toContain(id);
    expect(await archivedIds()).toContain(due()[3]!);
  });

  it('a task that changes while its batch is written is given back, not deleted, and archived later', async () => {
    failures.length = 0;
    const id = due()[2]!; // restored above, so due again
    const real = new FileArchive(archiveDir);
    const changing: ArchiveWriter = {
      write: async (batch, tables) => {
        const manifest = await real.write(batch, tables);
        await h.server.sql`UPDATE task SET updated_at = updated_at + interval '1 second' WHERE id = ${id}`;
        return manifest;
      },
      read: (archiveDay, batchId) => real.read(archiveDay, batchId),
    };
    const report = await sweepOnce(sweepDeps(changing));
    expect(report.archivedTasks).toBe(0);
    expect(failures).toEqual(['CHANGED']);
    expect(await archivedIds()).not.toContain(id);
    expect(nonEmpty(await store.taskHistory([id])).task).toHaveLength(1);
    const [claims] = await h.server.sql`SELECT count(*)::int AS n FROM retention_batch`;
    expect(claims!.n).toBe(0);

    expect((await sweepOnce(sweepDeps(real))).archivedTasks).toBe(1);
    expect(await archivedIds()).toContain(id);
  });

  it('a row written between the check and the delete rolls the delete back: nothing unarchived is lost', async () => {
    failures.length = 0;
    const id = due()[3]!;
    await restoreArchivedTask({ databaseUrl: h.databaseUrl, archiveDirectory: archiveDir }, id);
    const real = new FileArchive(archiveDir);
    const [execution] = await h.server.sql<{ id: string }[]>`SELECT id FROM execution WHERE task_id = ${id}`;
    const lateRow = newId();
    const late: ArchiveWriter = {
      write: (batch, tables) => real.write(batch, tables),
      // Runs inside the delete's transaction, after its read: another session commits a new row.
      read: async (archiveDay, batchId) => {
        await h.server.sql`
          INSERT INTO timeline (id, task_id, execution_id, kind, message, at)
          VALUES (${lateRow}, ${id}, ${execution!.id}, 'NOTE', 'late', ${h.clock.now()})`;
        return real.read(archiveDay, batchId);
      },
    };
    expect((await sweepOnce(sweepDeps(late))).archivedTasks).toBe(0);
    expect(failures).toEqual(['CHANGED']);
    expect(await archivedIds()).not.toContain(id);
    const [kept] = await h.server.sql`SELECT count(*)::int AS n FROM timeline WHERE id = ${lateRow}`;
    expect(kept!.n).toBe(1);
    expect(nonEmpty(await store.taskHistory([id])).task).toHaveLength(1);
  });

  it('deletes published outbox rows and old idempotency records after their windows, and nothing else', async () => {
    const now = h.clock.now();
    const old = new Date(now.getTime() - 8 * day);
    const recent = new Date(now.getTime() - 6 * day);
    const rows = await h.server.sql<{ id: string }[]>`SELECT id FROM outbox_event ORDER BY id LIMIT 3`;
    expect(rows).toHaveLength(3);
    const [oldPublished, recentPublished, pendingOld] = rows.map((r) => r.id);
    await h.server
      .sql`UPDATE outbox_event SET status = 'PUBLISHED', published_at = ${old} WHERE id = ${oldPublished!}`;
    await h.server
      .sql`UPDATE outbox_event SET status = 'PUBLISHED', published_at = ${recent} WHERE id = ${recentPublished!}`;
    await h.server
      .sql`UPDATE outbox_event SET status = 'DEAD', created_at = ${old} WHERE id = ${pendingOld!}`;

    await sweepOnce(sweepDeps(null));
    const left = await h.server.sql<{ id: string }[]>`
      SELECT id FROM outbox_event WHERE id = ANY(${[oldPublished!, recentPublished!, pendingOld!]}::uuid[])`;
    expect(left.map((r) => r.id).sort()).toEqual([recentPublished!, pendingOld!].sort());
    // (The earlier rounds swept them already; every round sweeps every table.)
    const [after] = await h.server.sql`SELECT count(*)::int AS total FROM idempotency`;
    expect(after!.total).toBe(idempotencyBefore.total - idempotencyBefore.old);
  });
});

describe('bulk jobs', () => {
  it('a bulk job finished before its window goes with its task list; a recent or running one stays', async () => {
    const now = h.clock.now().getTime();
    const job = async (status: string, finishedDaysAgo: number | null, tasks: number) => {
      const id = newId();
      const at = new Date(now - 40 * day);
      await h.server.sql`
        INSERT INTO bulk_job (id, action, idempotency_key, request_hash, filter, reason, actor, status,
                              matched, created_at, updated_at, finished_at)
        VALUES (${id}, 'CANCEL', ${`bulk-${id}`}, 'h', '{}', 'tidy up', 'operator', ${status}, ${tasks},
                ${at}, ${at}, ${finishedDaysAgo === null ? null : new Date(now - finishedDaysAgo * day)})`;
      await h.server.sql`
        INSERT INTO bulk_job_task (job_id, position, task_id, tenant_id, application_id)
        SELECT ${id}, n, gen_random_uuid(), ${app.tenantId}, ${app.applicationId}
        FROM generate_series(1, ${tasks}) AS n`;
      return id;
    };
    const old = await job('SUCCEEDED', 31, 3);
    const recent = await job('FAILED', 10, 2);
    const running = await job('RUNNING', null, 2);

    await sweepOnce(sweepDeps(null));
    const jobs = await h.server.sql<{ id: string; tasks: number }[]>`
      SELECT j.id, (SELECT count(*)::int FROM bulk_job_task t WHERE t.job_id = j.id) AS tasks
      FROM bulk_job j WHERE j.id = ANY(${[old, recent, running]}::uuid[])`;
    expect(Object.fromEntries(jobs.map((j) => [j.id, j.tasks]))).toEqual({ [recent]: 2, [running]: 2 });
    expect(
      await h.server.sql`SELECT 1 FROM bulk_job_task WHERE job_id = ${old}`.then((rows) => rows.length),
    ).toBe(0);
  });
});

describe('the retention loop', () => {
  it('runs in the server and reports its gauges on /metrics', async () => {
    const served = await startHarness({ runLoops: true });
    try {
      let text = '';
      for (
        let i = 0;
        i < 100 && !text.includes('tdp_retention_oldest_row_age_seconds{table="task"}');
        i += 1
      ) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        text = (await served.request('GET', '/metrics')).body as string;
      }
      expect(text).toContain('tdp_retention_oldest_row_age_seconds{table="task"}');
      expect(text).toContain('# TYPE tdp_retention_failures_total counter');
    } finally {
      await served.close();
    }
  });
});
