/**
 * Heartbeats of execution instances (docs/design/execution-leases.md). The light path only renews the lease
 * (no version, no event, no message) for every valid item in one statement; items it did not renew are
 * told apart (duplicate, stale attempt, wrong execution, terminal, not running). A STALE execution that
 * heartbeats again recovers through the full fact path (STEP_HEALTH_CHANGED → HEALTHY, new version).
 */
import type { HeartbeatItem, HeartbeatResult } from '@tdp/protocol';
import type { StepRecord, TaskState } from '../facts/records.ts';
import { type FactSession, inFactTransaction } from '../facts/session.ts';
import { deriveHealth } from '../facts/stateMachine.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import type { StatusDeps } from './deps.ts';
import type { ExecutionClaims, HandleHeartbeat, HeartbeatProbe } from './ports.ts';

interface Resolved {
  index: number;
  attemptId: string;
  seq: number;
}

export async function recordHeartbeats(
  deps: StatusDeps,
  principal: ApplicationPrincipal | null,
  items: HeartbeatItem[],
): Promise<HeartbeatResult[]> {
  const now = deps.clock.now();
  const results: HeartbeatResult[] = new Array(items.length);
  const resolved: Resolved[] = [];
  const reject = (index: number, outcome: HeartbeatResult['outcome'], executionId: string | null = null) => {
    results[index] = { index, attemptId: executionId, executionId, accepted: false, outcome, health: null };
  };

  // The common case first: heartbeats by handle, looked up and renewed in one statement. What it did
  // not renew goes the way of every other item below, to be told apart. This loop runs for every item
  // of every batch (`bench -- events` heartbeats), so it builds no more than it sends.
  const settled = new Set<number>();
  const renewedByHandle = new Set<string>();
  if (principal) {
    const byHandle: number[] = [];
    const beats: HandleHeartbeat[] = [];
    for (let index = 0; index < items.length; index += 1) {
      const item = items[index]!;
      if (!item.executionHandle || item.executionToken) continue;
      byHandle.push(index);
      beats.push({
        handleHash: deps.credentials.hashHandleHex(item.executionHandle),
        heartbeatSeq: item.heartbeatSeq,
        executionId: item.executionId ?? null,
      });
    }
    const renewed =
      beats.length > 0 ? await deps.store.renewLeasesByHandle(principal.applicationId, beats, now) : [];
    for (let n = 0; n < byHandle.length; n += 1) {
      const attemptId = renewed[n];
      if (!attemptId) continue;
      const index = byHandle[n]!;
      renewedByHandle.add(attemptId);
      results[index] = {
        index,
        attemptId,
        executionId: attemptId,
        accepted: true,
        outcome: 'ACCEPTED',
        health: 'HEALTHY',
      };
      settled.add(index);
    }
  }

  // Credentials: tokens are verified (cached per token); handles are looked up together.
  const handleItems = items.filter(
    (item, index) => !settled.has(index) && item.executionHandle && !item.executionToken,
  );
  const byHash = new Map<
    string,
    { applicationId: string; id: string; expiresAt: Date; revokedAt: Date | null }
  >();
  if (handleItems.length > 0 && principal) {
    const attempts = await deps.store.attemptsByHandle(
      handleItems.map((item) => deps.credentials.hashHandle(item.executionHandle!)),
    );
    for (const a of attempts) byHash.set(a.handleHash.toString('hex'), a);
  }
  for (const [index, item] of items.entries()) {
    if (settled.has(index)) continue;
    let claims: Pick<ExecutionClaims, 'executionId' | 'taskId' | 'stepId' | 'stepAttempt'> | null = null;
    if (item.executionToken) {
      claims = await deps.credentials.verify(item.executionToken, now);
    } else if (item.executionHandle && principal) {
      const attempt = byHash.get(deps.credentials.hashHandleHex(item.executionHandle));
      if (attempt && attempt.applicationId === principal.applicationId && attempt.expiresAt > now) {
        claims = {
          executionId: attempt.id,
          taskId: item.taskId ?? '',
          stepId: item.stepId ?? '',
          stepAttempt: item.stepAttempt ?? 0,
        };
      }
    }
    if (!claims) {
      reject(index, 'INVALID_CREDENTIAL', item.executionId ?? null);
      continue;
    }
    const named = (claimed: unknown, actual: unknown) =>
      claimed !== undefined && actual !== '' && actual !== 0 && claimed !== actual;
    if (
      named(item.executionId, claims.executionId) ||
      named(item.taskId, claims.taskId) ||
      named(item.stepId, claims.stepId) ||
      named(item.stepAttempt, claims.stepAttempt)
    ) {
      reject(index, 'WRONG_EXECUTION', item.executionId ?? claims.executionId);
      continue;
    }
    resolved.push({ index, attemptId: claims.executionId, seq: item.heartbeatSeq });
  }

  const renewed =
    resolved.length > 0
      ? await deps.store.renewLeases(
          resolved.map((r) => ({ attemptId: r.attemptId, heartbeatSeq: r.seq })),
          now,
        )
      : new Set<string>();
  // An item whose attempt the handle statement renewed (the same execution by token) is accepted too.
  for (const attemptId of renewedByHandle) renewed.add(attemptId);
  const missed = resolved.filter((r) => !renewed.has(r.attemptId));
  const probes = new Map(
    (missed.length > 0 ? await deps.store.probeAttempts(missed.map((m) => m.attemptId)) : []).map((p) => [
      p.attemptId,
      p,
    ]),
  );
  for (const r of resolved) {
    if (renewed.has(r.attemptId)) {
      results[r.index] = {
        index: r.index,
        attemptId: r.attemptId,
        executionId: r.attemptId,
        accepted: true,
        outcome: 'ACCEPTED',
        health: 'HEALTHY',
      };
      continue;
    }
    const probe = probes.get(r.attemptId);
    const outcome = probe ? classify(probe, r.seq) : 'WRONG_EXECUTION';
    if (outcome === 'RECOVER') {
      const health = await recoverStale(deps, probe!.taskId, r.attemptId, r.seq);
      results[r.index] = {
        index: r.index,
        attemptId: r.attemptId,
        executionId: r.attemptId,
        accepted: health !== null,
        outcome: health ? 'RECOVERED' : 'DUPLICATE',
        health,
      };
    } else {
      results[r.index] = {
        index: r.index,
        attemptId: r.attemptId,
        executionId: r.attemptId,
        accepted: false,
        outcome,
        health: probe ? (probe.health as 'HEALTHY') : null,
      };
    }
  }
  return results;
}

function classify(probe: HeartbeatProbe, seq: number): HeartbeatResult['outcome'] | 'RECOVER' {
  if (!probe.current || !probe.executionIsCurrent) return 'STALE_ATTEMPT';
  if (['SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED'].includes(probe.status)) return 'TERMINAL';
  if (probe.status !== 'RUNNING') return 'NOT_RUNNING';
  if (BigInt(seq) <= probe.lastHeartbeatSeq) return 'DUPLICATE';
  if (probe.health === 'STALE') return 'RECOVER';
  return 'DUPLICATE';
}

/** STALE → HEALTHY on a new heartbeat, as a full fact (once per execution: later ones renew normally). */
async function recoverStale(
  deps: StatusDeps,
  taskId: string,
  attemptId: string,
  seq: number,
): Promise<'HEALTHY' | null> {
  return inFactTransaction(deps, async (session) => {
    const before = await session.lockTask(taskId);
    const step = before?.steps.find((s) => s.attemptId === attemptId);
    if (
      !before ||
      !step ||
      step.health !== 'STALE' ||
      step.status !== 'RUNNING' ||
      BigInt(seq) <= step.lastHeartbeatSeq
    )
      return null;
    await commitHealthChange(deps, session, before, step, 'HEALTHY', {
      lastHeartbeatSeq: BigInt(seq),
      lastHeartbeatAt: session.now,
      staleSince: null,
    });
    return 'HEALTHY';
  });
}

/** A health change of one step attempt through the fact path (STEP_HEALTH_CHANGED). */
export async function commitHealthChange(
  deps: StatusDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  health: 'HEALTHY' | 'STALE',
  changes: Partial<StepRecord>,
): Promise<TaskState> {
  const now = session.now;
  const nextStep: StepRecord = { ...step, ...changes, health, version: step.version + 1n, updatedAt: now };
  const steps = before.steps.map((s) => (s.id === step.id ? nextStep : s));
  const after: TaskState = {
    ...before,
    task: { ...before.task, health: deriveHealth(steps), version: before.task.version + 1n, updatedAt: now },
    steps,
  };
  await session.commit(
    before,
    after,
    {
      id: deps.ids.newId(),
      type: 'STEP_HEALTH_CHANGED',
      producer: health === 'STALE' ? 'tdp:health-reconciler' : (step.expectedProducer ?? 'producer'),
      payload: {
        health,
        previousHealth: step.health,
        lastHeartbeatAt: step.lastHeartbeatAt?.toISOString() ?? null,
      },
      occurredAt: now,
      receivedAt: now,
      stepKey: step.key,
      stepAttempt: step.attempt,
      attemptId: step.attemptId,
      stepVersion: nextStep.version,
      operationCode: step.operationCode,
    },
    { write: { task: after.task, steps: [nextStep] } },
  );
  return after;
}
