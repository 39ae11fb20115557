/**
 * The Health Reconciler: marks RUNNING steps whose heartbeats stopped as STALE (never FAILED — that is
 * for the step's timeout, the lease reaper or the task's coordinator to decide). It claims overdue tasks
 * with SKIP LOCKED, rechecks each step under the task lock, and writes STEP_HEALTH_CHANGED through the
 * fact path. After the server starts, and after any period in which it could not reach the database, it
 * waits a grace period before judging anyone: the missing heartbeats may be its own outage's, not the
 * workers'. Each cycle changes at most `maxPerCycle`.
 */

import { inFactTransaction } from '../facts/session.ts';
import type { StatusDeps } from './deps.ts';
import { commitHealthChange } from './heartbeats.ts';

export interface ReconcilerOptions {
  graceMs: number;
  maxPerCycle: number;
}

export class HealthReconciler {
  private judgeAfter: Date;
  private failing = false;

  constructor(
    private readonly deps: StatusDeps,
    private readonly options: ReconcilerOptions,
  ) {
    this.judgeAfter = new Date(deps.clock.now().getTime() + options.graceMs);
  }

  /** Call when a round could not reach the database: the grace period restarts once it is back. */
  databaseFailed(): void {
    this.failing = true;
  }

  /** One cycle; returns how many steps became STALE. */
  async reconcile(): Promise<number> {
    const now = this.deps.clock.now();
    if (this.failing) {
      this.failing = false;
      this.judgeAfter = new Date(now.getTime() + this.options.graceMs);
    }
    if (now < this.judgeAfter) return 0;
    const candidates = await this.deps.store.overdueTasks(now, this.options.maxPerCycle);
    let marked = 0;
    for (const taskId of candidates) {
      if (marked >= this.options.maxPerCycle) break;
      marked += await inFactTransaction(this.deps, async (session) => {
        const before = await session.tx.lockTaskIfFree(taskId);
        if (!before) return 0;
        let count = 0;
        let state = before;
        for (const step of before.steps) {
          const deadline =
            step.heartbeatTimeoutSeconds !== null ? (step.lastHeartbeatAt ?? step.startedAt) : null;
          const overdue =
            deadline && deadline.getTime() + step.heartbeatTimeoutSeconds! * 1000 <= session.now.getTime();
          if (!step.current || step.status !== 'RUNNING' || step.health !== 'HEALTHY' || !overdue) continue;
          if (marked + count >= this.options.maxPerCycle) break;
          const current = state.steps.find((s) => s.id === step.id)!;
          state = await commitHealthChange(this.deps, session, state, current, 'STALE', {
            staleSince: session.now,
          });
          count += 1;
        }
        return count;
      });
    }
    return marked;
  }
}
