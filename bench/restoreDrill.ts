/**
 * `restore-drill` (issue 42): a point-in-time restore under load, end to end. A primary archiving its
 * WAL (the installed PostgreSQL), one `tdp server` on it, a worker (`bench/chaos/worker.ts tdp`, a
 * 250 ms sleep) and a client creating tasks at a fixed rate with Idempotency-Keys. `tdp backup` runs
 * during the load; later a moment T is recorded with what the database held then (one consistent
 * snapshot, bench/chaos/archivingPrimary.ts); the load goes on, then stops, and `tdp restore --to T`
 * makes a new cluster. A `tdp server` on it and a worker with a fresh local store take over; the client
 * replays every create it made, with the same keys.
 *
 * Checked: the restored rows per table and outbox positions are those of T; the creates accepted after T
 * come back as new tasks, the ones before as replays; nothing the client had accepted is missing; every
 * restored task finishes, once (one task per key, one STEP_COMPLETED per step).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort } from '../packages/cli/src/embeddedPostgres.ts';
import type { RestoreCheck } from '../packages/cli/src/restoreCheck.ts';
import { checkRestored } from '../packages/cli/src/restoreCheck.ts';
import { connectDatabase, generateKeyringEntry, migrate } from '../packages/server/src/main.ts';
import {
  archiveEverything,
  consistentMoment,
  restoreKeepRunning,
  startArchivingPrimary,
  tdpCli,
} from './chaos/archivingPrimary.ts';
import { ProcessGroup } from './chaos/processes.ts';
import { Completions, until } from './chaos/system.ts';
import { createChaosTask } from './chaos/tdp.ts';

const database = 'restore_drill';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Sizes {
  rate: number;
  /** Load before the backup, between the backup's end and T, and after T. */
  beforeBackupMs: number;
  beforeMomentMs: number;
  afterMomentMs: number;
  finishMs: number;
}

export interface RestoreDrillResult {
  rate: number;
  backupSeconds: number;
  restoreSeconds: number;
  restoredTo: string;
  momentRetries: number;
  /** Tables whose restored count is not the count at T (empty: all matched); outboxes likewise. */
  tablesDiffering: Record<string, { atMoment: number; restored: number }>;
  outboxesMatched: boolean;
  acceptedBeforeStop: number;
  /** Tasks the original worker finished before the stop (its lines). */
  finishedBeforeStop: number;
  tasksAtMoment: number;
  /** Of those, not finished at T: their end was after T, so the restored cluster runs them again. */
  openAtMoment: number;
  /** Keys the original worker finished that the restored one ran again (the work after T, lost by design). */
  reRuns: number;
  replayed: number;
  recreated: number;
  /** Keys the restored DB held that the replay re-created, or lacked that it answered as replays. */
  replayMismatches: number;
  lost: number;
  duplicated: { tasksPerKey: number; stepSuccesses: number };
  unfinished: number;
  firstFinishedSeconds: number | null;
  allFinishedSeconds: number | null;
  exited: string[];
}

/** Creates at a fixed rate, each retried with its key until accepted; `replay` sends them all again. */
class Client {
  readonly accepted = new Map<string, number>();
  /** Each key's first send time: part of its body, which a replay must repeat as it was. */
  private readonly sentAt = new Map<string, number>();
  private sent = 0;
  private running = false;
  private inFlight = new Set<Promise<void>>();

  constructor(
    private base: string,
    private readonly apiKey: string,
  ) {}

  async create(key: string): Promise<number> {
    const sentAt = this.sentAt.get(key) ?? Date.now();
    this.sentAt.set(key, sentAt);
    return createChaosTask(this.base, this.apiKey, key, sentAt);
  }

  start(rate: number): void {
    this.running = true;
    const startedAt = performance.now();
    void (async () => {
      while (this.running) {
        const key = `drill-${this.sent++}`;
        const sending = (async () => {
          for (;;) {
            const status = await this.create(key).catch(() => 0);
            if (status === 200 || status === 201) break;
            await sleep(250);
          }
          this.accepted.set(key, Date.now());
        })().finally(() => this.inFlight.delete(sending));
        this.inFlight.add(sending);
        const wait = startedAt + (this.sent * 1000) / rate - performance.now();
        if (wait > 0) await sleep(wait);
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    while (this.inFlight.size > 0) await Promise.all(this.inFlight);
  }

  /** Every create made, against `base`: which came back as replays (200) and which as new (201). */
  async replay(base: string): Promise<{ replayed: Set<string>; created: Set<string> }> {
    this.base = base;
    const replayed = new Set<string>();
    const created = new Set<string>();
    const keys = [...this.accepted.keys()];
    for (let i = 0; i < keys.length; i += 8)
      await Promise.all(
        keys.slice(i, i + 8).map(async (key) => {
          for (;;) {
            const status = await this.create(key).catch(() => 0);
            if (status === 200) replayed.add(key);
            else if (status === 201) created.add(key);
            else {
              await sleep(250);
              continue;
            }
            return;
          }
        }),
      );
    return { replayed, created };
  }
}

/** A `tdp server` and a worker on `databaseUrl`, in `group`; resolves once the server is ready. */
async function startTdp(
  group: ProcessGroup,
  suffix: string,
  env: Record<string, string>,
  workerEnv: Record<string, string>,
  completions: Completions,
) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const server = group.add(`server-${suffix}`, ['packages/cli/src/main.ts', 'server'], {
    ...env,
    TDP_PORT: String(port),
  });
  server.start();
  await until(
    () =>
      fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2_000) }).then(
        (r) => r.status === 200,
        () => false,
      ),
    60_000,
    `server-${suffix} ready`,
  );
  const startWorker = (workerKey: string) =>
    group
      .add(
        `worker-${suffix}`,
        ['bench/chaos/worker.ts', 'tdp'],
        { ...workerEnv, TDP_URL: base, TDP_WORKER_KEY: workerKey },
        completions.onLine,
      )
      .start();
  return { base, startWorker };
}

const differences = (atMoment: RestoreCheck, restored: RestoreCheck) => {
  const differing: Record<string, { atMoment: number; restored: number }> = {};
  for (const name of new Set([...Object.keys(atMoment.tables), ...Object.keys(restored.tables)]))
    if (atMoment.tables[name] !== restored.tables[name])
      differing[name] = { atMoment: atMoment.tables[name] ?? 0, restored: restored.tables[name] ?? 0 };
  const outboxes = (check: RestoreCheck) =>
    JSON.stringify(check.outboxes.map((o) => [o.table, o.waiting, o.published, o.dead]));
  return { differing, outboxesMatched: outboxes(atMoment) === outboxes(restored) };
};

export async function restoreDrill(sizes: Sizes): Promise<RestoreDrillResult> {
  const primary = await startArchivingPrimary();
  const admin = connectDatabase({ url: primary.server.adminUrl, maxConnections: 1 });
  await admin.unsafe(`CREATE DATABASE ${database}`);
  await admin.end();
  const url = primary.urlFor(database);
  const sql = connectDatabase({ url, maxConnections: 2 });
  await migrate(sql);
  const group = new ProcessGroup('restore-drill');
  const adminToken = `tdpadm_drill_${Date.now()}`;
  const serverEnv = {
    TDP_HOST: '127.0.0.1',
    TDP_ADMIN_TOKEN: adminToken,
    TDP_SECRET_KEYS: generateKeyringEntry('drill'),
    TDP_LOG_LEVEL: 'warn',
    NATS_URL: '',
    REDIS_URL: '',
  };
  const workerEnv = {
    CHAOS_SLEEP_MS: '250',
    CHAOS_CONCURRENCY: '8',
    TDP_NODE_ID: 'drill-node',
    TDP_WORKER_NAME: 'drill',
  };
  const before = new Completions();
  const after = new Completions();
  let restore: Awaited<ReturnType<typeof restoreKeepRunning>> | null = null;
  let restoredSql: ReturnType<typeof connectDatabase> | null = null;
  try {
    const original = await startTdp(
      group,
      'primary',
      { ...serverEnv, DATABASE_URL: url },
      { ...workerEnv, TDP_WORKER_DB: join(primary.home, 'worker-primary.db') },
      before,
    );
    const post = async <T>(path: string, token: string, body: unknown): Promise<T> => {
      const response = await fetch(`${original.base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (!response.ok) throw new Error(`POST ${path} answered ${response.status}: ${await response.text()}`);
      return (await response.json()) as T;
    };
    const tenant = await post<{ id: string }>('/admin/v1/tenants', adminToken, { name: 'drill' });
    const app = await post<{ apiKey: { key: string } }>(
      `/admin/v1/tenants/${tenant.id}/applications`,
      adminToken,
      { name: 'drill' },
    );
    const workerKey = (await post<{ key: string }>('/admin/v1/worker-credentials', adminToken, {})).key;
    await post('/v1/workflow-definitions', app.apiKey.key, {
      name: 'chaos',
      version: '1',
      steps: [
        {
          key: 'sleep',
          capability: 'chaos.sleep',
          capabilityVersion: '1',
          inputMapping: { key: '$.input.key', sentAt: '$.input.sentAt' },
        },
      ],
    });
    original.startWorker(workerKey);
    const client = new Client(original.base, app.apiKey.key);
    client.start(sizes.rate);
    await sleep(sizes.beforeBackupMs);

    const backups = join(primary.home, 'backups');
    const backupStarted = performance.now();
    const backup = await tdpCli(['backup', '--to', backups, '--archive', primary.archive], url);
    if (backup.code !== 0) throw new Error(`tdp backup failed (${backup.code}): ${backup.stderr}`);
    const backupSeconds = (performance.now() - backupStarted) / 1000;
    await sleep(sizes.beforeMomentMs);

    const moment = await consistentMoment(sql, async (tx) => ({
      check: await checkRestored(tx),
      extra: await tx<{ key: string; done: boolean }[]>`
        SELECT input->>'key' AS key, lifecycle_status = 'SUCCEEDED' AS done FROM task`,
    }));
    console.log(
      `  T = ${moment.at}: ${moment.check.tables.task} tasks, ${client.accepted.size} creates accepted${moment.retries ? ` (${moment.retries} moments retaken)` : ''}`,
    );
    await sleep(sizes.afterMomentMs);
    await client.stop();
    await archiveEverything(sql, primary.archive);
    await group.close(35_000);
    const exited = group.ownExits.map((e) => `${e.name}: ${e.code ?? e.signal}`);
    await sql.end();
    // The primary is gone: everything from here runs on the restored cluster.
    await primary.server.stop('immediate');

    const restoredPort = await freePort();
    const restoreStarted = performance.now();
    const backupPath = await findBackup(backups);
    restore = await restoreKeepRunning(
      [
        '--backup',
        backupPath,
        '--to',
        moment.at,
        '--pgdata',
        join(primary.home, 'restored'),
        '--port',
        String(restoredPort),
      ],
      url,
      () => {},
    );
    const restoreSeconds = (performance.now() - restoreStarted) / 1000;
    const { differing, outboxesMatched } = differences(moment.check, restore.report);
    const restoredUrl = `postgres://postgres:${primary.password}@127.0.0.1:${restoredPort}/${database}`;

    const group2 = new ProcessGroup('restore-drill');
    const serverStarted = Date.now();
    const restored = await startTdp(
      group2,
      'restored',
      { ...serverEnv, DATABASE_URL: restoredUrl },
      { ...workerEnv, TDP_WORKER_DB: join(primary.home, 'worker-restored.db') },
      after,
    );
    restored.startWorker(workerKey);
    const { replayed, created } = await client.replay(restored.base);
    restoredSql = connectDatabase({ url: restoredUrl, maxConnections: 1 });
    const state = async () =>
      (
        await restoredSql!<{ unfinished: number; tasks: number }[]>`
        SELECT count(*) FILTER (WHERE lifecycle_status <> 'SUCCEEDED')::int AS unfinished,
               count(*)::int AS tasks FROM task`
      )[0]!;
    let allFinishedAt: number | null = null;
    for (const deadline = Date.now() + sizes.finishMs; Date.now() < deadline; await sleep(250))
      if ((await state()).unfinished === 0) {
        allFinishedAt = Date.now();
        break;
      }
    const [integrity] = await restoredSql<{ per_key: number; steps: number }[]>`
      SELECT
        (SELECT count(*)::int FROM (SELECT 1 FROM task GROUP BY input->>'key' HAVING count(*) > 1) d) AS per_key,
        (SELECT count(*)::int FROM (
           SELECT 1 FROM task_event WHERE type = 'STEP_COMPLETED'
           GROUP BY task_id, step_key HAVING count(*) > 1) s) AS steps`;
    const keys = new Set(
      (await restoredSql<{ key: string }[]>`SELECT input->>'key' AS key FROM task`).map((r) => r.key),
    );
    const firsts = [...after.byKey.values()].map((runs) => runs[0]!.at);
    await group2.close(35_000);
    exited.push(...group2.ownExits.map((e) => `${e.name} (restored): ${e.code ?? e.signal}`));
    const atMoment = new Set(moment.extra.map((r) => r.key));
    const openAtMoment = new Set(moment.extra.filter((r) => !r.done).map((r) => r.key));
    return {
      rate: sizes.rate,
      backupSeconds,
      restoreSeconds,
      restoredTo: restore.report.restoredTo,
      momentRetries: moment.retries,
      tablesDiffering: differing,
      outboxesMatched,
      acceptedBeforeStop: client.accepted.size,
      finishedBeforeStop: before.byKey.size,
      tasksAtMoment: atMoment.size,
      openAtMoment: openAtMoment.size,
      reRuns: [...after.byKey.keys()].filter((k) => before.byKey.has(k)).length,
      replayed: replayed.size,
      recreated: created.size,
      replayMismatches:
        [...created].filter((k) => atMoment.has(k)).length +
        [...replayed].filter((k) => !atMoment.has(k)).length,
      lost: [...client.accepted.keys()].filter((k) => !keys.has(k)).length,
      duplicated: { tasksPerKey: integrity!.per_key, stepSuccesses: integrity!.steps },
      unfinished: (await state()).unfinished,
      firstFinishedSeconds: firsts.length > 0 ? (Math.min(...firsts) - serverStarted) / 1000 : null,
      allFinishedSeconds: allFinishedAt === null ? null : (allFinishedAt - serverStarted) / 1000,
      exited,
    };
  } finally {
    await group.close(35_000);
    await restoredSql?.end();
    await restore?.stop();
    await primary.server.stop('immediate').catch(() => {});
    await rm(primary.home, { recursive: true, force: true });
  }
}

async function findBackup(backups: string): Promise<string> {
  const [name] = (await readdir(backups)).filter((entry) => !entry.endsWith('.json'));
  if (!name) throw new Error(`no backup in ${backups}`);
  return join(backups, name);
}

const yes = (ok: boolean) => (ok ? 'yes' : 'no');
const s = (seconds: number | null) => (seconds === null ? 'never' : seconds.toFixed(1));

export function restoreDrillTable(r: RestoreDrillResult): string {
  const rows = Object.keys(r.tablesDiffering).length === 0 && r.outboxesMatched;
  return [
    '| scenario | system | creates/s | backup s | restore s | rows per table matched | accepted | at T (open) | replayed / re-created | lost | dup | re-runs | unfinished | first finished s | all finished s | exited |',
    `|${' --- |'.repeat(16)}`,
    `| restore-drill | TDP | ${r.rate} | ${r.backupSeconds.toFixed(1)} | ${r.restoreSeconds.toFixed(1)} | ${yes(rows)} | ${r.acceptedBeforeStop} | ${r.tasksAtMoment} (${r.openAtMoment}) | ${r.replayed} / ${r.recreated} | ${r.lost} | ${r.duplicated.tasksPerKey + r.duplicated.stepSuccesses} | ${r.reRuns} | ${r.unfinished} | ${s(r.firstFinishedSeconds)} | ${s(r.allFinishedSeconds)} | ${r.exited.length} |`,
  ].join('\n');
}

/** The drill once; true when the restore matched T and nothing was lost, duplicated or left unfinished. */
export async function runRestoreDrill(options: { smoke: boolean }): Promise<boolean> {
  const sizes: Sizes = options.smoke
    ? { rate: 5, beforeBackupMs: 2_000, beforeMomentMs: 3_000, afterMomentMs: 3_000, finishMs: 90_000 }
    : { rate: 20, beforeBackupMs: 5_000, beforeMomentMs: 8_000, afterMomentMs: 8_000, finishMs: 120_000 };
  console.log(
    `restore-drill${options.smoke ? ' (SMOKE)' : ''}: ${sizes.rate} creates/s, tdp backup under load, tdp restore --to T, then a server and a fresh worker on the restored cluster and the client's replay`,
  );
  const result = await restoreDrill(sizes);
  const matched = Object.keys(result.tablesDiffering).length === 0 && result.outboxesMatched;
  console.log(
    `  TDP: restored to ${result.restoredTo} in ${result.restoreSeconds.toFixed(1)} s, rows per table ${matched ? 'matched' : `differ: ${JSON.stringify(result.tablesDiffering)}${result.outboxesMatched ? '' : ', outboxes differ'}`}; ${result.finishedBeforeStop} of ${result.acceptedBeforeStop} finished before the stop; replay ${result.replayed} replayed, ${result.recreated} re-created (${result.replayMismatches} not as T says); ${result.lost} lost, ${result.unfinished} unfinished`,
  );
  console.log(`\n${restoreDrillTable(result)}\n`);
  mkdirSync('artifacts', { recursive: true });
  writeFileSync(
    `artifacts/restore-drill${options.smoke ? '-smoke' : ''}.json`,
    `${JSON.stringify(result, null, 2)}\n`,
  );
  return (
    matched &&
    result.lost === 0 &&
    result.replayMismatches === 0 &&
    result.duplicated.tasksPerKey + result.duplicated.stepSuccesses === 0 &&
    result.unfinished === 0 &&
    result.exited.length === 0
  );
}
