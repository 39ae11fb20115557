/**
 * The worker gateway's use cases. Workers authenticate with worker keys (`tdpw_…`), never with
 * application keys. A worker may claim labels, but placement trusts only the labels an operator put on
 * its node. (A worker's events pass its attempt inbox, in the status context: status/workerInbox.ts.)
 */
import { newId, type WorkerRegistration } from '@tdp/protocol';
import { generateApiKey, keyIsUsable, parseApiKey, secretMatches } from '../identity/apiKeys.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock } from '../shared/ports.ts';
import type { TtlCache } from '../shared/ttlCache.ts';
import type { WorkerOwner, WorkerSession, WorkerStore } from './ports.ts';

export interface WorkerDeps {
  clock: Clock;
  workers: WorkerStore;
  heartbeatIntervalSeconds: number;
  heartbeatTtlMs: number;
  /** For a registration that names no `maxConcurrency`. */
  defaultMaxConcurrency: number;
  /** A worker registered or changed: unplaceable requests may fit now. */
  workersChanged: () => void;
  /** Worker key rows, read by every worker request; a revoked key is forgotten at once (every replica). */
  credentials: TtlCache<WorkerCredential>;
  /**
   * Which key each worker session belongs to, for the requests an ended session may still make (its
   * events): that never changes, so the inbox need not read the worker row per batch.
   */
  owners: TtlCache<WorkerOwner>;
}

export type WorkerCredential = NonNullable<Awaited<ReturnType<WorkerStore['findCredential']>>>;

export async function issueWorkerKey(deps: WorkerDeps, label: string | null) {
  const generated = generateApiKey('tdpw');
  await deps.workers.insertCredential(generated.keyId, generated.secretHash, label, deps.clock.now());
  return { id: generated.keyId, key: generated.plaintext };
}

/**
 * Revokes a worker key now. The caller announces it (core/identity/ports.ts `Revocations`): every
 * replica forgets the key and ends its command streams, and its next request is 401.
 */
export async function revokeWorkerKey(deps: WorkerDeps, keyId: string): Promise<void> {
  if (!(await deps.workers.revokeCredential(keyId, deps.clock.now())))
    throw new AppError('API_KEY_NOT_FOUND', `there is no worker key ${keyId}`);
  deps.credentials.delete(keyId);
}

export async function authenticateWorkerKey(deps: WorkerDeps, plaintext: string): Promise<string | null> {
  const parsed = parseApiKey(plaintext, 'tdpw');
  if (!parsed) return null;
  const credential = await deps.credentials.get(parsed.keyId, () =>
    deps.workers.findCredential(parsed.keyId),
  );
  if (!credential || !secretMatches(parsed.secret, credential.secretHash)) return null;
  return keyIsUsable({ revokedAt: credential.revokedAt, expiresAt: null }, deps.clock.now())
    ? credential.id
    : null;
}

export async function registerWorker(deps: WorkerDeps, credentialId: string, request: WorkerRegistration) {
  const now = deps.clock.now();
  // The node record exists from here on; an operator sets its trusted labels, group and weight.
  await deps.workers.upsertNode({ id: request.nodeId }, now);
  const session: WorkerSession = {
    id: newId(),
    instanceId: request.instanceId,
    name: request.name,
    nodeId: request.nodeId,
    credentialId,
    capabilities: request.capabilities,
    claimedLabels: request.labels ?? {},
    resources: {
      cpuMillis: request.resources?.cpuMillis ?? 1000,
      memoryMb: request.resources?.memoryMb ?? 1024,
      gpus: request.resources?.gpus ?? 0,
    },
    maxConcurrency: request.maxConcurrency ?? deps.defaultMaxConcurrency,
    runtimeState: 'READY',
    runningAttempts: 0,
    lastHeartbeatAt: now,
    createdAt: now,
    endedAt: null,
  };
  await deps.workers.insertWorker(session);
  deps.workersChanged();
  return {
    workerId: session.id,
    heartbeatIntervalSeconds: deps.heartbeatIntervalSeconds,
    heartbeatTtlSeconds: Math.round(deps.heartbeatTtlMs / 1000),
  };
}

/**
 * The worker session behind a request. An ended session (its leases expired) may still report — its
 * late events are then answered STALE — but it gets no commands and cannot heartbeat back to life.
 */
export async function requireWorker(
  deps: WorkerDeps,
  credentialId: string,
  workerId: string,
  allowEnded = false,
): Promise<WorkerOwner> {
  const worker = allowEnded
    ? await deps.owners.get(workerId, () => deps.workers.findWorkerOwner(workerId))
    : await deps.workers.findWorkerOwner(workerId);
  if (!worker || worker.credentialId !== credentialId || (worker.endedAt && !allowEnded)) {
    throw new AppError('UNAUTHENTICATED', `worker ${workerId} is not yours or has ended; register again`);
  }
  return worker;
}
