/**
 * What `/readyz` answers: whether this process should be given work. Not ready while the pool cannot
 * hand out a connection that answers within `databaseDeadlineMs`, while migrations are pending, while a
 * background loop has been busy with one round past `loopRoundDeadlineMs` (it is stuck: scheduling or
 * publishing has stopped here), and for `processFaultUnreadyMs` after an unhandled rejection or uncaught
 * exception the process survived (`processGuard.ts`). An embedder may also hold it not ready until its own
 * setup is done (`hold`/`release`: `tdp dev` until its development key, samples and demo app work).
 */
import type { LoopHealth } from './loops/wakeableLoop.ts';

export interface ReadinessReport {
  ready: boolean;
  /** Each check: 'ok', or what is wrong, for people (no internal detail). */
  checks: Record<string, string>;
  /** Every loop's progress, for operators. */
  loops: LoopHealth[];
}

export interface ServerHealthOptions {
  /** True when the migrations are current (a database round trip). */
  migrationsCurrent: () => Promise<boolean>;
  databaseDeadlineMs: number;
  /** Why no host of the database URL takes writes, or null (databaseHosts.ts). */
  databaseUnwritable?: () => string | null;
  loopRoundDeadlineMs: number;
  processFaultUnreadyMs: number;
  monotonicMs?: () => number;
}

export class ServerHealth {
  /** The loops of this process, once they exist. */
  loops: { health(): LoopHealth }[] = [];
  private lastFault: { kind: string; at: number } | null = null;
  /** Checks an embedder holds not ready, with what each waits for. */
  private readonly holds = new Map<string, string>();
  private readonly monotonicMs: () => number;

  constructor(private readonly options: ServerHealthOptions) {
    this.monotonicMs = options.monotonicMs ?? (() => performance.now());
  }

  /** Why no host of the database URL takes writes, or null. */
  databaseUnwritable(): string | null {
    return this.options.databaseUnwritable?.() ?? null;
  }

  /** An unhandled rejection or uncaught exception reached the process guard. */
  processFault(kind: string): void {
    this.lastFault = { kind, at: this.monotonicMs() };
  }

  /** `check` fails, saying `waitingFor`, until `release(check)`. */
  hold(check: string, waitingFor: string): void {
    this.holds.set(check, waitingFor);
  }

  release(check: string): void {
    this.holds.delete(check);
  }

  async check(): Promise<ReadinessReport> {
    const checks: Record<string, string> = { ...(await this.database()) };
    for (const [name, waitingFor] of this.holds) checks[name] = waitingFor;
    const loops = this.loops.map((loop) => loop.health());
    const stuck = loops.filter(
      (loop) => loop.busyForMs !== null && loop.busyForMs > this.options.loopRoundDeadlineMs,
    );
    checks.loops =
      stuck.length === 0
        ? 'ok'
        : `stuck: ${stuck.map((loop) => `${loop.name} (one round for ${seconds(loop.busyForMs ?? 0)})`).join(', ')}`;
    const fault = this.lastFault;
    const faultAgoMs = fault ? this.monotonicMs() - fault.at : Number.POSITIVE_INFINITY;
    checks.process =
      fault && faultAgoMs < this.options.processFaultUnreadyMs
        ? `${fault.kind} ${seconds(faultAgoMs)} ago`
        : 'ok';
    return { ready: Object.values(checks).every((value) => value === 'ok'), checks, loops };
  }

  private async database(): Promise<Record<'database' | 'migrations', string>> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'deadline'>((resolve) => {
      timer = setTimeout(() => resolve('deadline'), this.options.databaseDeadlineMs);
    });
    try {
      const current = await Promise.race([this.options.migrationsCurrent(), deadline]);
      if (current === 'deadline')
        return {
          database:
            this.options.databaseUnwritable?.() ??
            `no connection answered within ${this.options.databaseDeadlineMs} ms`,
          migrations: 'unknown',
        };
      return { database: 'ok', migrations: current ? 'ok' : 'pending migrations' };
    } catch {
      return { database: this.options.databaseUnwritable?.() ?? 'unavailable', migrations: 'unknown' };
    } finally {
      clearTimeout(timer);
    }
  }
}

const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;
