/** What a scenario drives: one system (TDP or a peer) with its processes, its client and its checks. */
import type { ProcessGroup } from './processes.ts';

/** Every execution a worker reported (its stdout lines), by key. */
export class Completions {
  readonly byKey = new Map<string, { job: string; at: number; worker?: string }[]>();

  /** A worker's stdout line: `{ done, job, at, worker? }`; other lines are ignored. */
  readonly onLine = (line: string): void => {
    if (!line.startsWith('{"done"')) return;
    const { done, job, at, worker } = JSON.parse(line) as {
      done: string;
      job: string;
      at: number;
      worker?: string;
    };
    const list = this.byKey.get(done) ?? [];
    list.push({ job, at, ...(worker ? { worker } : {}) });
    this.byKey.set(done, list);
  };

  firstAt(key: string): number | undefined {
    return this.byKey.get(key)?.[0]?.at;
  }
}

export interface Integrity {
  /** Keys with more than one task or job. */
  rowsPerKey: number;
  /** Steps whose success was recorded more than once (TDP's facts; null where the system keeps none). */
  stepSuccesses: number | null;
  /** Tasks whose event versions are not 1…version without a hole (TDP). */
  versionGaps: number | null;
}

/** A process a fault kills and brings back: a `tdp server` replica, or a worker. */
export interface Restartable {
  name: string;
  kill(): Promise<void>;
  /** Starts it again; resolves once it serves (a server answers /readyz). */
  restart(): Promise<void>;
}

export interface SystemUnderTest {
  name: string;
  database: string;
  processes: ProcessGroup;
  completions: Completions;
  /** What "SIGKILL of a server replica" kills: a server for TDP, a worker process for the peers (no server). */
  replica: Restartable;
  workers: Restartable[];
  /**
   * Submits one job; resolves once the system accepted it (with the name of the server replica that
   * did, where there are replicas), throws otherwise.
   */
  submit(key: string, sentAt: number, attempt: number): Promise<string | undefined>;
  /** The replica a worker is connected to when nothing fails (TDP); none for the peers. */
  homeReplicaOf?(worker: string): string | undefined;
  /** Keys the system records as finished; null when it cannot be asked now. */
  finished(): Promise<Set<string> | null>;
  integrity(): Promise<Integrity | null>;
  /** Processes that run but do not serve (e.g. a server whose /readyz is not 200). */
  unresponsive(): Promise<string[]>;
  /** Stops the client and then every process; wedged ones land in processes.wedged. */
  close(): Promise<void>;
}

export interface SystemOptions {
  /** How long a job's work takes (a sleep), ms. */
  sleepMs: number;
  /** Jobs each worker runs at once. */
  concurrency: number;
}

export function workerEnv(options: SystemOptions): Record<string, string> {
  return { CHAOS_SLEEP_MS: String(options.sleepMs), CHAOS_CONCURRENCY: String(options.concurrency) };
}

export async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
