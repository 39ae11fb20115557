/**
 * Scheduling glossary
 * - node: a machine an operator registered, with trusted labels, a weight and a management status.
 * - worker: a session of the worker runtime on a node, offering capabilities with versions.
 * - hard filters: a worker that fails one cannot take the step; each failure has a reason for people.
 * - score: preferred-label matches × 1,000,000 + weight × 1,000 − running attempts × 10,000; ties go to
 *   the lowest node id, then worker id, so the choice is deterministic.
 */
import type { Affinity } from '@tdp/protocol';

export interface WorkerCandidate {
  workerId: string;
  nodeId: string;
  nodeStatus: 'ACTIVE' | 'CORDONED';
  nodeLabels: Record<string, string>;
  nodeGroup: string | null;
  weight: number;
  runtimeState: 'READY' | 'DRAINING';
  schedulingStatus: 'ELIGIBLE' | 'INELIGIBLE';
  lastHeartbeatAt: Date;
  /** A capability's own `maxConcurrency` caps its attempts on this worker within the worker's limit. */
  capabilities: { name: string; version: string; maxConcurrency?: number }[];
  runningAttempts: number;
  /** Of `runningAttempts`, how many run each capability (by name; a capability not running is absent). */
  runningByCapability: Record<string, number>;
  maxConcurrency: number;
  freeResources: { cpuMillis: number; memoryMb: number; gpus: number };
}

export interface PlacementRequest {
  capability: string;
  capabilityVersion: string;
  affinity: Affinity;
}

export type Selection =
  | { ok: true; workerId: string; nodeId: string; score: number; considered: number }
  /** `waitsForCapacity`: a worker would take it but for the attempts it already runs. */
  | { ok: false; reasons: string[]; waitsForCapacity: boolean };

export function score(candidate: WorkerCandidate, affinity: Affinity): number {
  const preferred = Object.entries(affinity.preferredLabels ?? {}).filter(
    ([k, v]) => candidate.nodeLabels[k] === v,
  ).length;
  return preferred * 1_000_000 + candidate.weight * 1_000 - candidate.runningAttempts * 10_000;
}

const atConcurrencyLimit = 'worker is at its concurrency limit';

/** Why this worker cannot take the request (empty: it can). */
export function disqualifications(
  candidate: WorkerCandidate,
  request: PlacementRequest,
  now: Date,
  heartbeatTtlMs: number,
): string[] {
  const reasons: string[] = [];
  const { affinity } = request;
  if (affinity.nodeId && candidate.nodeId !== affinity.nodeId) reasons.push(`not on node ${affinity.nodeId}`);
  if (affinity.group && candidate.nodeGroup !== affinity.group)
    reasons.push(`not in group ${affinity.group}`);
  if (candidate.nodeStatus !== 'ACTIVE') reasons.push(`node ${candidate.nodeId} is ${candidate.nodeStatus}`);
  if (candidate.runtimeState !== 'READY') reasons.push(`worker is ${candidate.runtimeState}`);
  if (candidate.schedulingStatus !== 'ELIGIBLE') reasons.push('worker is not eligible');
  if (now.getTime() - candidate.lastHeartbeatAt.getTime() > heartbeatTtlMs)
    reasons.push('worker heartbeat is stale');
  const offered = candidate.capabilities.find(
    (c) => c.name === request.capability && c.version === request.capabilityVersion,
  );
  if (!offered) reasons.push(`does not offer ${request.capability}@${request.capabilityVersion}`);
  for (const [key, value] of Object.entries(affinity.requiredLabels ?? {})) {
    if (candidate.nodeLabels[key] !== value) reasons.push(`node lacks label ${key}=${value}`);
  }
  if (candidate.runningAttempts >= candidate.maxConcurrency) reasons.push(atConcurrencyLimit);
  else if (
    offered?.maxConcurrency !== undefined &&
    (candidate.runningByCapability[request.capability] ?? 0) >= offered.maxConcurrency
  )
    reasons.push(`${atConcurrencyLimit} for ${request.capability}`);
  const min = affinity.minimumResources ?? {};
  if ((min.cpuMillis ?? 0) > candidate.freeResources.cpuMillis)
    reasons.push(`needs ${min.cpuMillis} CPU millis`);
  if ((min.memoryMb ?? 0) > candidate.freeResources.memoryMb) reasons.push(`needs ${min.memoryMb} MB memory`);
  if ((min.gpus ?? 0) > candidate.freeResources.gpus) reasons.push(`needs ${min.gpus} GPU`);
  return reasons;
}

/**
 * How many more attempts the workers that can take work now would take in all (the sum of their free
 * slots): a scheduler round claims no more requests than that, so that a full pool does not claim and
 * put back a whole round of requests each time one slot frees.
 */
export function freeSlots(candidates: WorkerCandidate[], now: Date, heartbeatTtlMs: number): number {
  let free = 0;
  for (const c of candidates) {
    if (takesWork(c, now, heartbeatTtlMs)) free += Math.max(0, c.maxConcurrency - c.runningAttempts);
  }
  return free;
}

/** Whether the worker takes new work at all (whatever its load): active node, ready, eligible, beating. */
export function takesWork(c: WorkerCandidate, now: Date, heartbeatTtlMs: number): boolean {
  return (
    c.nodeStatus === 'ACTIVE' &&
    c.runtimeState === 'READY' &&
    c.schedulingStatus === 'ELIGIBLE' &&
    now.getTime() - c.lastHeartbeatAt.getTime() <= heartbeatTtlMs
  );
}

/**
 * Hard capacity: the placing transaction re-checks it (orchestration/placement.ts `lockCandidates`).
 * Candidates are read outside that transaction, so another replica's round, or a create placing its
 * first steps, may have filled a worker since. The placing transaction locks the workers `workersToLock`
 * names (`FactTransaction.lockWorkerCapacity`, held until commit) and places from `withLockedLoads`: the
 * next placer's count then includes this one's attempts. The workers are named least loaded first.
 */
export function workersToLock(
  candidates: WorkerCandidate[],
  now: Date,
  heartbeatTtlMs: number,
  capabilities?: string[],
): string[] {
  return candidates
    .filter(
      (c) =>
        looksFree(c, now, heartbeatTtlMs) &&
        (!capabilities || c.capabilities.some((x) => capabilities.includes(x.name))),
    )
    .sort(
      (a, b) =>
        a.runningAttempts - b.runningAttempts ||
        a.nodeId.localeCompare(b.nodeId) ||
        a.workerId.localeCompare(b.workerId),
    )
    .map((c) => c.workerId);
}

/**
 * Copies of `candidates` for one transaction: a locked worker carries its counts as of the lock; one that
 * looked free but was not locked (another placer holds it, or it was not asked for) counts as full. A
 * worker that takes no work keeps its counts, so its reasons for people stay the true ones.
 */
export function withLockedLoads(
  candidates: WorkerCandidate[],
  loads: Map<string, { running: number; byCapability: Record<string, number> }>,
  now: Date,
  heartbeatTtlMs: number,
): WorkerCandidate[] {
  return candidates.map((c) => {
    const load = loads.get(c.workerId);
    if (load) return { ...c, runningAttempts: load.running, runningByCapability: { ...load.byCapability } };
    const full = looksFree(c, now, heartbeatTtlMs);
    return {
      ...c,
      runningAttempts: full ? c.maxConcurrency : c.runningAttempts,
      runningByCapability: { ...c.runningByCapability },
    };
  });
}

function looksFree(c: WorkerCandidate, now: Date, heartbeatTtlMs: number): boolean {
  return takesWork(c, now, heartbeatTtlMs) && c.runningAttempts < c.maxConcurrency;
}

/** Step-level reasons for people when nobody qualifies ("no worker offers image.watermark@2"). */
export function unschedulableReasons(
  candidates: WorkerCandidate[],
  request: PlacementRequest,
  now: Date,
  heartbeatTtlMs: number,
  /** Each worker's disqualifications, when the caller has them already. */
  reasonsOf: (candidate: WorkerCandidate) => string[] = (c) =>
    disqualifications(c, request, now, heartbeatTtlMs),
): string[] {
  const offering = candidates.filter((c) =>
    c.capabilities.some((x) => x.name === request.capability && x.version === request.capabilityVersion),
  );
  if (candidates.length === 0) return ['no worker is registered'];
  if (offering.length === 0) return [`no worker offers ${request.capability}@${request.capabilityVersion}`];
  const reasons = new Set<string>();
  for (const [key, value] of Object.entries(request.affinity.requiredLabels ?? {})) {
    if (!offering.some((c) => c.nodeStatus === 'ACTIVE' && c.nodeLabels[key] === value)) {
      reasons.add(`required label ${key}=${value} matches no active node`);
    }
  }
  if (reasons.size > 0) return [...reasons];
  for (const candidate of offering) {
    for (const reason of reasonsOf(candidate)) reasons.add(`${candidate.workerId}: ${reason}`);
  }
  return [...reasons];
}

/** The hard filters, then the highest score; ties by node id, then worker id. */
export function selectWorker(
  candidates: WorkerCandidate[],
  request: PlacementRequest,
  now: Date,
  heartbeatTtlMs: number,
): Selection {
  const disqualified = new Map(
    candidates.map((c) => [c, disqualifications(c, request, now, heartbeatTtlMs)]),
  );
  const qualified = candidates.filter((c) => disqualified.get(c)!.length === 0);
  if (qualified.length === 0)
    return {
      ok: false,
      reasons: unschedulableReasons(candidates, request, now, heartbeatTtlMs, (c) => disqualified.get(c)!),
      waitsForCapacity: [...disqualified.values()].some((reasons) =>
        reasons.every((r) => r.startsWith(atConcurrencyLimit)),
      ),
    };
  const ranked = qualified
    .map((c) => ({ c, s: score(c, request.affinity) }))
    .sort(
      (a, b) => b.s - a.s || a.c.nodeId.localeCompare(b.c.nodeId) || a.c.workerId.localeCompare(b.c.workerId),
    );
  const best = ranked[0]!;
  return {
    ok: true,
    workerId: best.c.workerId,
    nodeId: best.c.nodeId,
    score: best.s,
    considered: candidates.length,
  };
}
