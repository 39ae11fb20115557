/** What the fact kernel needs from outside: the transaction it writes through, and the loops' wake-up. */
import type {
  AclEntry,
  AttemptRecord,
  DedupRecord,
  IdempotencyRecord,
  MapItemRecord,
  RealtimeRecord,
  SignalRecord,
  StepDecisionRecord,
  TaskState,
  WorkflowRecord,
} from './records.ts';
import type { FactWriteSet } from './writeSet.ts';

/**
 * A unique key the transaction wrote — an idempotency key, a client workflow key — was already taken by
 * another transaction (maybe a concurrent one whose commit the write waited for). Nothing was written.
 */
export class KeyTakenError extends Error {
  constructor(options?: { cause?: unknown }) {
    super('a unique key this transaction wrote is already taken', options);
    this.name = 'KeyTakenError';
  }
}

export interface FactStore {
  /**
   * Runs `work` in one transaction; retried from the start on a deadlock or serialization failure. A key
   * already taken fails it with `KeyTakenError`.
   * With `writeOnly`, `work` may not read: everything it writes (at commit) is applied atomically in
   * one round trip.
   */
  transaction<T>(work: (tx: FactTransaction) => Promise<T>, options?: { writeOnly?: boolean }): Promise<T>;
}

/** A worker's open attempts, in all and by the capability of their step. */
export interface WorkerLoad {
  running: number;
  byCapability: Record<string, number>;
}

export interface ClaimedSchedulingRequest {
  id: string;
  taskId: string;
  tenantId: string;
  stepId: string;
  /** Why no worker could take it when last tried (empty: not tried yet, or reopened since). */
  reasons: string[];
}

/** A scheduling request not yet tagged with its place in line (`workers/fairShare.ts`). */
export interface Arrival {
  id: string;
  tenantId: string;
  applicationId: string;
  /** The task's fairness key within its application ('' for none: one flow with the keyless tasks). */
  fairnessKey: string;
  /** The task's weight of its fairness key (1 unless the create said otherwise). */
  fairnessWeight: number;
  priority: number;
  createdAt: Date;
}

/** What tagging needs to know of the flows it tags for. */
export interface FlowState {
  /** The virtual time between tenants (the last tenant tag served). */
  platformServed: number;
  /** A flow's last tag, by `tenant:<id>`, `application:<id>` or `key:<application id>:<key>`; absent: 0. */
  lastTag: Map<string, number>;
  /** A tenant's virtual time between its applications, by `tenant:<id>`; absent: 0. */
  tenantServed: Map<string, number>;
  /** An application's virtual time between its fairness keys, by `application:<id>`; absent: 0. */
  applicationServed: Map<string, number>;
  /** Operators' weights by `tenant:<id>` or `application:<id>`; absent: 1. */
  weights: Map<string, number>;
}

export interface ArrivalTags {
  id: string;
  tenantTag: number;
  applicationTag: number;
  keyTag: number;
  orderAt: Date;
}

/**
 * The virtual times a round's placements moved: between tenants, per tenant between its applications
 * (by `tenant:<id>`), per application between its fairness keys (by `application:<id>`).
 */
export interface VirtualTimes {
  platformServed: number;
  tenantServed: Map<string, number>;
  applicationServed: Map<string, number>;
}

/** A waiting request as a scheduler round sees it. */
export interface TaggedRequest {
  id: string;
  tenantId: string;
  applicationId: string;
  fairnessKey: string;
  tenantTag: number;
  applicationTag: number;
  keyTag: number;
}

/** A round's turns (`FactTransaction.schedulingTurns`): who held them, and who is served. */
export interface SchedulingTurns {
  tenantTurns: TaggedRequest[];
  applicationTurns: TaggedRequest[];
  keyTurns: TaggedRequest[];
  served: TaggedRequest[];
  /** The served requests, as the round places them. */
  claimed: ClaimedSchedulingRequest[];
}

/** Why a step could not hold a slot of a concurrency key's pool. */
export interface ConcurrencyRefusal {
  key: { name: string; value: string };
  running: number;
  limit: number;
  paused: boolean;
}

/** Why a step could not take a token of a rate limit's bucket (`definitions/rateLimits.ts`). */
export interface RateRefusal {
  key: { name: string; value: string };
  limit: number;
  intervalMs: number;
  paused: boolean;
  /** When the bucket has a token again (unused when paused: the step is parked). */
  nextAt: Date;
}

/** A claimed request put back: why, and the concurrency key pool it waits on (parked), if that is why. */
export interface DeferredRequest {
  id: string;
  reasons: string[];
  parkedOn?: { name: string; value: string; limit: number };
  /** Due again then rather than at the round's retry (a rate limit's next token). */
  availableAt?: Date;
}

/** A debounce or singleton key of task creation (core/tasks/taskKeys.ts). */
export type TaskKeySlotKind = 'debounce' | 'singleton';

/**
 * The pool a step of a task waiting for its singleton key is parked on (`scheduling_request.parked_key`;
 * the value is the key, within the request's application). Not a valid concurrency key name, so no
 * declared key shares its parked steps.
 */
export const singletonPool = 'tdp:singleton';

/** The task holding such a key, and for a debounce when its window ends. */
export interface TaskKeySlot {
  taskId: string;
  windowEndsAt: Date | null;
}

export interface FactTransaction {
  /**
   * Untagged open requests (oldest first, up to `limit`) with their flows' state, locked until commit;
   * null when another transaction is tagging (its round tags them).
   */
  schedulingArrivals(limit: number): Promise<{ arrivals: Arrival[]; flows: FlowState } | null>;
  /** The arrivals' tags and their flows' new last tags. */
  writeArrivalTags(arrivals: Arrival[], tags: ArrivalTags[], lastTags: Map<string, number>): Promise<void>;
  /**
   * One round's turns: the `limit` lowest tenant tags of due requests, within each tenant as many of its
   * lowest application tags, within each application as many of its first requests by order (served);
   * all locked (SKIP LOCKED) until commit. `untriedOnly`: only requests no round has tried yet.
   */
  schedulingTurns(now: Date, limit: number, options: { untriedOnly: boolean }): Promise<SchedulingTurns>;
  /** The tags a round moved, and the virtual times it served (null: it served none). */
  writeTurns(retagged: TaggedRequest[], served: VirtualTimes | null): Promise<void>;
  /** Puts claimed requests back with why they could not be placed, to be tried again at `availableAt`. */
  deferSchedulingRequests(requests: DeferredRequest[], availableAt: Date): Promise<void>;
  /**
   * Holds one slot of each concurrency key pool for a step being placed (until the step stops), or for
   * one item of a map step (`itemIndex`, until the item's attempt ends), or none and says which pool
   * refused (paused, or at its limit). The pools stay locked until commit.
   */
  holdConcurrency(hold: {
    tenantId: string;
    taskId: string;
    stepId: string;
    itemIndex?: number | undefined;
    keys: { name: string; value: string; declaredLimit: number }[];
    at: Date;
  }): Promise<ConcurrencyRefusal | null>;
  /**
   * Takes one token of each rate limit's bucket for a step being placed, or none and says which
   * bucket refused (paused, or empty until `nextAt`). The buckets stay locked until commit.
   */
  takeRateTokens(take: {
    tenantId: string;
    keys: { name: string; value: string; declaredLimit: number; intervalMs: number }[];
    at: Date;
  }): Promise<RateRefusal | null>;
  /**
   * Gives back the concurrency slots this transaction held at `at` for a step (or one map item) it then
   * did not place.
   */
  dropHeldSlots(stepId: string, itemIndex: number | undefined, at: Date): Promise<void>;
  /** Why no worker could take this step's open request when last tried (empty: none, or not tried). */
  schedulingReasons(stepId: string): Promise<string[]>;
  /** Locks an application's debounce or singleton key until commit, then reads its holder (null: none). */
  lockTaskKeySlot(kind: TaskKeySlotKind, applicationId: string, key: string): Promise<TaskKeySlot | null>;
  /**
   * For a step of a task waiting for its singleton key: locks the key until commit, and unless another
   * unfinished task holds it, makes `taskId` its holder (null). Otherwise the task holding it.
   */
  takeSingleton(
    applicationId: string,
    key: string,
    taskId: string,
    at: Date,
  ): Promise<{ heldBy: string } | null>;
  /** Makes a task the holder of a key this transaction locked. */
  setTaskKeySlot(
    kind: TaskKeySlotKind,
    applicationId: string,
    key: string,
    slot: TaskKeySlot,
    at: Date,
  ): Promise<void>;
  /** Transaction-scoped advisory locks on keys (e.g. step + attempt), taken in key order. */
  advisoryLocks(keys: string[]): Promise<void>;
  /**
   * Locks workers' capacity until commit, then counts their open attempts: the count runs after the
   * lock is granted, so it sees every attempt placed by the transaction that held it. `all` waits for
   * every one (taken in id order); `firstFree` waits for none and keeps only the first of `workerIds`,
   * in their order, that no other transaction holds. Only locked workers still taking work (not
   * drained nor ended, whatever the caller's candidates said) are in the map.
   */
  lockWorkerCapacity(workerIds: string[], mode: 'all' | 'firstFree'): Promise<Map<string, WorkerLoad>>;
  /** Locks the task unless another transaction holds it (then null: try again later). */
  lockTaskIfFree(taskId: string): Promise<TaskState | null>;
  /** The task with its current execution and that execution's step rows, locked until commit. */
  lockTask(taskId: string): Promise<TaskState | null>;
  /**
   * Several tasks as `lockTask` reads one, locked in id order (missing ids are left out), and with
   * `workflows` their workflows too, locked after them in id order.
   */
  lockTasks(
    taskIds: string[],
    options?: { workflows?: boolean },
  ): Promise<{ tasks: TaskState[]; workflows: WorkflowRecord[] }>;
  lockWorkflow(workflowId: string): Promise<WorkflowRecord | null>;
  /** Locks the workflows in id order. */
  lockWorkflows(workflowIds: string[]): Promise<WorkflowRecord[]>;
  findWorkflowByKey(applicationId: string, clientWorkflowKey: string): Promise<WorkflowRecord | null>;
  findTaskIdByClientKey(workflowId: string, clientTaskKey: string): Promise<string | null>;
  findDedup(eventId: string): Promise<DedupRecord | null>;
  findDedups(eventIds: string[]): Promise<DedupRecord[]>;
  findAttempt(attemptId: string): Promise<AttemptRecord | null>;
  findAttemptByHandle(handleHash: Buffer): Promise<AttemptRecord | null>;
  findAttemptsByHandle(handleHashes: Buffer[]): Promise<AttemptRecord[]>;
  /** A map step's lowest-indexed PENDING items, at most `limit` (placement). */
  pendingMapItems(stepId: string, limit: number): Promise<MapItemRecord[]>;
  mapItemsAt(stepId: string, indexes: number[]): Promise<MapItemRecord[]>;
  /** Every item of a map step, in item order (its output, once it ends). */
  allMapItems(stepId: string): Promise<MapItemRecord[]>;
  /** The attempts of the running items of these map steps, with the workers holding them. */
  runningMapAttempts(stepIds: string[]): Promise<{ attemptId: string; workerId: string | null }[]>;
  acl(taskId: string): Promise<AclEntry[]>;
  /** Dynamic registrations of the task since `since` (for the per-minute limit). */
  countRegistrationsSince(taskId: string, since: Date): Promise<number>;
  findIdempotency(principal: string, operation: string, key: string): Promise<IdempotencyRecord | null>;
  /** The decisions of one decider (`user:<id>` or `operator`) on the task's approval steps. */
  findStepDecisions(taskId: string, decidedBy: string): Promise<StepDecisionRecord[]>;
  /** Keeps a signal sent to a task; with `consumed`, it is taken by that step at once. */
  insertSignal(signal: SignalRecord, consumed: { stepId: string; at: Date } | null): Promise<void>;
  /** Takes the oldest kept signal of this name for the step (null: none is waiting). */
  takeSignal(taskId: string, name: string, stepId: string, at: Date): Promise<SignalRecord | null>;
  /** Sends every statement at once (pipelined); false `idempotencyClaimed` means the key was taken. */
  write(write: FactWriteSet): Promise<void>;
  /** Several facts' writes in one round: each row once, in its last state (see `mergeWrites`). */
  writeAll(writes: FactWriteSet[]): Promise<void>;
  /** Writes sent together with the COMMIT (no round trip of their own); their failure fails the commit. */
  writeAtCommit(writes: FactWriteSet[]): void;
}

/** What a commit wrote that a background loop works off. */
export interface CommittedWork {
  outbox: boolean;
  scheduling: boolean;
  callbacks: boolean;
  /** Offline notifications to deliver (the notification webhook's loop). */
  notifications: boolean;
  /** The earliest due time among the timers it wrote. */
  earliestTimer: Date | null;
  /** Workers it wrote commands for (a replica whose stream holds one of them must be told). */
  commandsFor: string[];
  /** It ended attempts, so workers have capacity again: steps waiting for a worker may fit now. */
  capacityFreed: boolean;
  /** Realtime rows to publish now (see `OutboxSignal.realtimeHandoff`). */
  realtime: RealtimeRecord[];
}

/**
 * Wakes the loops that have new work after a commit; a hint, never required (each loop also polls).
 * Only those with new rows: waking every loop on every commit cost a query per loop per commit.
 */
export interface OutboxSignal {
  committed(work: CommittedWork): void;
  /** When set, realtime rows are handed over in `committed` for publishing at once. */
  readonly realtimeHandoff?: RealtimeHandoffMode;
  /**
   * False when no event bus is configured: facts then write no domain outbox rows (the task's event log
   * stays the record; an outbox row would only be claimed, handed to nobody and marked). Default true.
   */
  readonly domainEvents?: boolean;
}

/**
 * - `durable`: the rows are also written, claimable by the relay's loop only `graceMs` later (it takes
 *   what the hand-off failed to publish) — for a gateway that outlives this process (Redis, HTTP API).
 * - `memoryOnly`: the rows are not written at all — for the in-process memory gateway, whose channels
 *   die with the process: after a crash every client reloads a snapshot, so a stored row would buy
 *   nothing.
 */
export type RealtimeHandoffMode = { kind: 'durable'; graceMs: number } | { kind: 'memoryOnly' };

/** Hears each committed task change (after the commit): the metrics of docs/observability.md. */
export interface FactObserver {
  committed(before: TaskState | null, after: TaskState): void;
}
