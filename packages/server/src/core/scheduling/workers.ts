/**
 * The worker gateway's use cases. Workers authenticate with worker keys (`tdpw_…`), never with
 * application keys. A worker may claim labels, but placement trusts only the labels an operator put on
 * its node. Events from a worker pass its attempt inbox: the attempt must be the worker's and the lease
 * version current; then they go through the status service like any other fact.
 */
import { type EventResult, newId, type WorkerEvent, type WorkerRegistration } from '@tdp/protocol';
import type { WorkerCommandRecord } from '../facts/records.ts';
import { generateApiKey, keyIsUsable, parseApiKey, secretMatches } from '../identity/apiKeys.ts';
import { AppError } from '../shared/errors.ts';
import type { TtlCache } from '../shared/ttlCache.ts';
import type { StatusDeps } from '../status/deps.ts';
import { claimsOfAttempt, platformOutputSchema, reportTaskEvents } from '../status/events.ts';
import type { WorkerOwner, WorkerSession, WorkerStore } from './ports.ts';

export interface WorkerDeps {
  status: StatusDeps;
  workers: WorkerStore;
  heartbeatIntervalSeconds: number;
  heartbeatTtlMs: number;
  /** A worker registered or changed: unplaceable requests may fit now. */
  workersChanged: () => void;
  /** Worker key rows, read by every worker request (there is no revocation yet to wait for). */
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
  await deps.workers.insertCredential(generated.keyId, generated.secretHash, label, deps.status.clock.now());
  return { id: generated.keyId, key: generated.plaintext };
}

export async function authenticateWorkerKey(deps: WorkerDeps, plaintext: string): Promise<string | null> {
  const parsed = parseApiKey(plaintext, 'tdpw');
  if (!parsed) return null;
  const credential = await deps.credentials.get(parsed.keyId, () =>
    deps.workers.findCredential(parsed.keyId),
  );
  if (!credential || !secretMatches(parsed.secret, credential.secretHash)) return null;
  return keyIsUsable({ revokedAt: credential.revokedAt, expiresAt: null }, deps.status.clock.now())
    ? credential.id
    : null;
}

export async function registerWorker(deps: WorkerDeps, credentialId: string, request: WorkerRegistration) {
  const now = deps.status.clock.now();
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
    maxConcurrency: request.maxConcurrency ?? 4,
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

export type WorkerEventOutcome =
  | { ok: true; result: EventResult }
  | { ok: false; code: string; status: number; detail: string };

/** The attempt inbox: each item checked against the worker and its lease, then the status service. */
export async function recordWorkerEvents(
  deps: WorkerDeps,
  worker: WorkerOwner,
  items: WorkerEvent[],
  /** Commands the worker acknowledges with these events: one request and one commit for both. */
  commandAcks: string[] = [],
): Promise<WorkerEventOutcome[]> {
  const attempts = new Map(
    (await deps.status.store.attemptsById([...new Set(items.map((i) => i.attemptId))])).map((a) => [a.id, a]),
  );
  const outcomes: (WorkerEventOutcome | null)[] = items.map((item) => {
    const attempt = attempts.get(item.attemptId);
    if (!attempt || attempt.workerId !== worker.id)
      return {
        ok: false,
        code: 'STEP_NOT_REGISTERED',
        status: 404,
        detail: `attempt ${item.attemptId} is not leased to this worker`,
      };
    if (attempt.leaseVersion !== item.leaseVersion)
      return {
        ok: false,
        code: 'STALE_EXECUTION',
        status: 409,
        detail: `lease version ${item.leaseVersion} is not current (${attempt.leaseVersion})`,
      };
    return null;
  });
  const accepted = items
    .map((item, index) => ({ item, index }))
    .filter(({ index }) => outcomes[index] === null);
  const acks =
    commandAcks.length > 0
      ? { workerId: worker.id, commandIds: commandAcks, at: deps.status.clock.now() }
      : undefined;
  if (accepted.length === 0) {
    // Acknowledgements alone: one statement, no transaction around it.
    if (acks)
      await deps.status.store.transaction(
        async (tx) => tx.writeAtCommit([{ commandAcks: acks, events: [], outbox: [], realtime: [] }]),
        { writeOnly: true },
      );
    return outcomes as WorkerEventOutcome[];
  }
  const results = await reportTaskEvents(
    deps.status,
    accepted.map(({ item }) => {
      const attempt = attempts.get(item.attemptId)!;
      return {
        credential: {
          kind: 'worker' as const,
          claims: claimsOfAttempt(attempt, ''),
        },
        event: {
          eventId: item.eventId,
          eventType: item.eventType,
          sourceSeq: item.sourceSeq,
          progress: item.progress,
          phaseCode: item.phaseCode,
          phaseLabel: item.phaseLabel,
          message: item.message,
          durationMs: item.durationMs,
          occurredAt: item.occurredAt,
          error: item.error,
          ...(item.eventType === 'STEP_COMPLETED' && item.output !== undefined
            ? { data: { schema: platformOutputSchema, value: item.output } }
            : {}),
        },
      };
    }),
    { attempts: [...attempts.values()], ...(acks ? { commandAcks: acks } : {}) },
  );
  accepted.forEach(({ index }, i) => {
    const outcome = results[i]!;
    outcomes[index] = outcome.ok
      ? { ok: true, result: outcome.result }
      : { ok: false, code: outcome.error.code, status: 0, detail: outcome.error.message };
  });
  return outcomes as WorkerEventOutcome[];
}

/** Notifies open command streams in this process that their worker has new commands. */
export class CommandHub {
  private readonly listeners = new Map<string, Set<(commands?: WorkerCommandRecord[]) => void>>();

  listen(workerId: string, listener: (commands?: WorkerCommandRecord[]) => void): () => void {
    const set = this.listeners.get(workerId) ?? new Set();
    set.add(listener);
    this.listeners.set(workerId, set);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(workerId);
    };
  }

  /** The workers have new commands: their streams read them from the database. */
  notify(workerIds: string[]): void {
    for (const id of workerIds) for (const listener of this.listeners.get(id) ?? []) listener();
  }

  /** Committed commands, handed to the open streams of this process as they are (no read back). */
  deliver(commands: WorkerCommandRecord[]): void {
    const byWorker = new Map<string, WorkerCommandRecord[]>();
    for (const command of commands) {
      const list = byWorker.get(command.workerId) ?? [];
      list.push(command);
      byWorker.set(command.workerId, list);
    }
    for (const [workerId, list] of byWorker)
      for (const listener of this.listeners.get(workerId) ?? []) listener(list);
  }
}
