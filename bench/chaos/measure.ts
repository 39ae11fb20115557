/**
 * What one scenario run of one system gives: counts (finished, lost, duplicated), the processes that
 * exited or wedged, recovery and drain times, p99 per phase and dead tuples; and the table.
 */
import type { Submission } from './client.ts';
import type { OwnExit } from './processes.ts';
import type { Completions, Integrity } from './system.ts';

export interface Phases {
  startedAt: number;
  faultStartedAt: number;
  faultEndedAt: number;
  endedAt: number;
}

export interface Result {
  scenario: string;
  system: string;
  submitted: number;
  accepted: number;
  finished: number;
  /** Accepted but not finished when the drain ended. */
  lost: number;
  /** The scenario loses accepted jobs by design (asynchronous replication): `lost` is reported, not a miss. */
  lossByDesign?: string;
  /** Keys with more than one task/job, plus steps whose success was recorded twice. */
  duplicated: number;
  versionGaps: number | null;
  /** Keys whose work ran more than once (at-least-once re-runs after a kill; not duplicates). */
  reruns: number;
  exited: OwnExit[];
  wedged: string[];
  /** The process slowest to exit after SIGTERM at the end (a shutdown stuck until a deadline shows here). */
  slowestStop: { name: string; seconds: number } | null;
  /** Seconds from the fault's end until completions were back to 90 % of the steady rate. */
  recoverySeconds: number | null;
  /** Seconds from the fault's end until the backlog was back to its steady size. */
  drainSeconds: number | null;
  /** Submit → work done: jobs finished before the fault; sent during it; sent in the second half of the recovery phase. */
  p99: { before: number | null; during: number | null; after: number | null };
  /** Submit → accepted (the client's view, retries included), same phases by the time of submission. */
  acceptP99: { before: number | null; during: number | null; after: number | null };
  deadTuples: { max: number; end: number };
  /**
   * Before the fault, submit → work done split by whether the replica that accepted the job is the one
   * its worker is connected to (TDP, two replicas): the cost of a command crossing replicas.
   */
  replicaP99: { same: number | null; other: number | null } | null;
}

/** Completions are counted over this window to tell whether the rate is back. */
const rateWindowMs = 2_000;

function p99(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))]!;
}

export function measure(
  identity: { scenario: string; system: string },
  phases: Phases,
  submissions: Submission[],
  completions: Completions,
  finishedKeys: Set<string>,
  integrity: Integrity | null,
  processes: { exited: OwnExit[]; wedged: string[]; stopSeconds: { name: string; seconds: number }[] },
  deadTuples: { max: number; end: number },
  homeReplicaOf?: (worker: string) => string | undefined,
): Result {
  const accepted = submissions.filter((s) => s.acceptedAt !== undefined);
  const finished = accepted.filter((s) => finishedKeys.has(s.key));
  const firstDone = accepted.map((s) => ({ sentAt: s.sentAt, doneAt: completions.firstAt(s.key) }));
  const latencyOf = (from: number, to: number) =>
    firstDone
      .filter((j) => j.doneAt !== undefined && j.sentAt >= from && j.sentAt < to)
      .map((j) => j.doneAt! - j.sentAt);
  const acceptLatency = (from: number, to: number) =>
    accepted.filter((s) => s.sentAt >= from && s.sentAt < to).map((s) => s.acceptedAt! - s.sentAt);
  const { startedAt, faultStartedAt, faultEndedAt, endedAt } = phases;
  const afterFrom = faultEndedAt + (endedAt - faultEndedAt) / 2;

  // Completions per second in the steady phase (its first second is the start-up).
  const doneTimes = firstDone.map((j) => j.doneAt).filter((t): t is number => t !== undefined);
  const doneBetween = (from: number, to: number) => doneTimes.filter((t) => t >= from && t < to).length;
  const steadyFrom = startedAt + 1_000;
  const steadyRate = doneBetween(steadyFrom, faultStartedAt) / ((faultStartedAt - steadyFrom) / 1000);
  let recoverySeconds: number | null = null;
  for (let t = faultEndedAt; t + rateWindowMs <= endedAt; t += 250) {
    if (doneBetween(t, t + rateWindowMs) / (rateWindowMs / 1000) >= 0.9 * steadyRate) {
      recoverySeconds = (t - faultEndedAt) / 1000;
      break;
    }
  }
  // Backlog: submitted (and eventually accepted) but not yet done, sampled every 100 ms.
  const sentTimes = firstDone.map((j) => j.sentAt);
  const backlogAt = (t: number) =>
    sentTimes.filter((s) => s <= t).length - doneTimes.filter((d) => d <= t).length;
  let steadyBacklog = 0;
  for (let t = steadyFrom; t < faultStartedAt; t += 100)
    steadyBacklog = Math.max(steadyBacklog, backlogAt(t));
  let drainSeconds: number | null = null;
  const lastDone = Math.max(endedAt, ...doneTimes);
  for (let t = faultEndedAt; t <= lastDone; t += 100) {
    if (backlogAt(t) <= steadyBacklog * 1.5 + 2) {
      drainSeconds = (t - faultEndedAt) / 1000;
      break;
    }
  }
  const steadyRuns = accepted.flatMap((s) => {
    const run = completions.byKey.get(s.key)?.[0];
    return run?.worker && s.acceptedBy && s.sentAt >= steadyFrom && run.at < faultStartedAt
      ? [{ crossed: homeReplicaOf?.(run.worker) !== s.acceptedBy, latency: run.at - s.sentAt }]
      : [];
  });
  const replicaP99 = (crossed: boolean) =>
    p99(steadyRuns.filter((r) => r.crossed === crossed).map((r) => r.latency));
  let reruns = 0;
  for (const runs of completions.byKey.values()) if (runs.length > 1) reruns += 1;
  return {
    ...identity,
    submitted: submissions.length,
    accepted: accepted.length,
    finished: finished.length,
    lost: accepted.length - finished.length,
    duplicated: integrity ? integrity.rowsPerKey + (integrity.stepSuccesses ?? 0) : Number.NaN,
    versionGaps: integrity?.versionGaps ?? null,
    reruns,
    exited: processes.exited,
    wedged: processes.wedged,
    slowestStop: processes.stopSeconds.reduce<Result['slowestStop']>(
      (slowest, stop) => (slowest && slowest.seconds >= stop.seconds ? slowest : stop),
      null,
    ),
    recoverySeconds,
    drainSeconds,
    p99: {
      // Before: jobs finished before the fault (a job caught by it counts as during).
      before: p99(
        firstDone
          .filter((j) => j.doneAt !== undefined && j.sentAt >= steadyFrom && j.doneAt < faultStartedAt)
          .map((j) => j.doneAt! - j.sentAt),
      ),
      during: p99(latencyOf(faultStartedAt, faultEndedAt)),
      after: p99(latencyOf(afterFrom, endedAt)),
    },
    acceptP99: {
      before: p99(acceptLatency(steadyFrom, faultStartedAt)),
      during: p99(acceptLatency(faultStartedAt, faultEndedAt)),
      after: p99(acceptLatency(afterFrom, endedAt)),
    },
    deadTuples,
    replicaP99: homeReplicaOf ? { same: replicaP99(false), other: replicaP99(true) } : null,
  };
}

/** Whether TDP met the targets in this run (the peers are measured, not judged). */
export function verdict(r: Result): string[] {
  const misses: string[] = [];
  if (r.lost > 0 && !r.lossByDesign) misses.push(`${r.lost} lost`);
  if (!(r.duplicated === 0)) misses.push(`${r.duplicated} duplicated`);
  if (r.versionGaps) misses.push(`${r.versionGaps} version gaps`);
  if (r.exited.length > 0) misses.push(`${r.exited.length} process exits`);
  if (r.wedged.length > 0) misses.push(`wedged: ${r.wedged.join(', ')}`);
  if (r.recoverySeconds === null || r.recoverySeconds > 5) misses.push('rate not back within 5 s');
  if (r.p99.before !== null && r.p99.after !== null && r.p99.after > 2 * r.p99.before)
    misses.push('p99 after > 2× before');
  return misses;
}

const ms = (v: number | null) =>
  v === null ? '—' : v >= 10_000 ? `${(v / 1000).toFixed(0)} s` : `${v.toFixed(0)}`;
const sec = (v: number | null) => (v === null ? 'never' : v.toFixed(1));

export function table(results: Result[]): string {
  const head = [
    'scenario',
    'system',
    'accepted',
    'finished',
    'lost',
    'dup',
    'gaps',
    're-runs',
    'exited',
    'wedged',
    'slowest stop s',
    'rate back s',
    'drained s',
    'p99 before ms',
    'p99 during ms',
    'p99 after ms',
    'dead tuples max/end',
  ];
  const rows = results.map((r) => [
    r.scenario,
    r.system,
    String(r.accepted),
    String(r.finished),
    String(r.lost),
    String(r.duplicated),
    r.versionGaps === null ? 'n/a' : String(r.versionGaps),
    String(r.reruns),
    String(r.exited.length),
    String(r.wedged.length),
    r.slowestStop ? r.slowestStop.seconds.toFixed(1) : '—',
    sec(r.recoverySeconds),
    sec(r.drainSeconds),
    ms(r.p99.before),
    ms(r.p99.during),
    ms(r.p99.after),
    `${r.deadTuples.max}/${r.deadTuples.end}`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}
