import type { OperatorAuditRecord, WorkerCommandRecord } from '../facts/records.ts';
import type { WorkerCandidate } from './selector.ts';

export interface WorkerSession {
  id: string;
  instanceId: string;
  name: string;
  nodeId: string;
  credentialId: string;
  /** Each with its own concurrency limit, if the worker declared one. */
  capabilities: { name: string; version: string; maxConcurrency?: number }[];
  claimedLabels: Record<string, string>;
  resources: { cpuMillis: number; memoryMb: number; gpus: number };
  maxConcurrency: number;
  runtimeState: 'READY' | 'DRAINING';
  runningAttempts: number;
  lastHeartbeatAt: Date;
  createdAt: Date;
  endedAt: Date | null;
}

export type WorkerOwner = Pick<WorkerSession, 'id' | 'credentialId' | 'endedAt'>;

export interface PendingRequest {
  id: string;
  taskId: string;
  stepId: string;
  priority: number;
}

/** A durable command as read back for a worker's stream. */
export interface WorkerCommand {
  id: string;
  type: WorkerCommandRecord['type'];
  payload: Record<string, unknown>;
  createdAt: Date;
}

export type { OperatorAuditRecord } from '../facts/records.ts';

export interface WorkerStore {
  findCredential(id: string): Promise<{ id: string; secretHash: Buffer; revokedAt: Date | null } | null>;
  insertCredential(id: string, secretHash: Buffer, label: string | null, at: Date): Promise<void>;
  /** False when there is no such worker key. */
  revokeCredential(id: string, at: Date): Promise<boolean>;
  upsertNode(
    node: {
      id: string;
      labels?: Record<string, string>;
      group?: string | null;
      weight?: number;
    },
    at: Date,
  ): Promise<void>;
  insertWorker(worker: WorkerSession): Promise<void>;
  /** Who a worker session belongs to, and whether it ended (no load counted: every request asks). */
  findWorkerOwner(id: string): Promise<WorkerOwner | null>;
  /** Whether the session is live, and whether this beat changed its runtime state. */
  heartbeat(
    id: string,
    at: Date,
    runtimeState: 'READY' | 'DRAINING' | null,
  ): Promise<{ live: boolean; stateChanged: boolean }>;
  endWorker(id: string, at: Date): Promise<void>;
  /**
   * Marks a live session DRAINING (it is placed on no more) and writes its DRAIN command and the audit
   * record, in one transaction; null (nothing written) when no live session has this id. A session the
   * operator drained already writes nothing and answers its first drain's command and audit (`repeated`).
   */
  drainWorker(command: WorkerCommandRecord, audit: OperatorAuditRecord): Promise<DrainOutcome | null>;
  candidates(): Promise<WorkerCandidate[]>;
  /**
   * The live sessions; with `servingTenants`, only those offering a capability (name and version) a step
   * of one of those tenants' published workflows runs: the workers that serve them.
   */
  listWorkers(filter?: { servingTenants?: string[] }): Promise<
    (WorkerSession & {
      nodeLabels: Record<string, string>;
      nodeStatus: string;
      schedulingStatus: 'ELIGIBLE' | 'INELIGIBLE';
    })[]
  >;
  /** The worker's unacknowledged commands, oldest first (at most 1,000). */
  openCommands(workerId: string): Promise<WorkerCommand[]>;
  ackCommand(workerId: string, commandId: string, at: Date): Promise<boolean>;
  /** Acknowledges all of `commandIds` if every one is the worker's, else none; returns the ids that are not. */
  ackCommands(workerId: string, commandIds: string[], at: Date): Promise<string[]>;
  /** Requests that gave up waiting: their reasons for people, and when to try again. */
  deferRequest(id: string, reasons: string[], availableAt: Date): Promise<void>;
  pendingReasons(taskId: string): Promise<Map<string, string[]>>;
  /** Requests waiting after finding no worker become due now (a worker registered or changed). */
  retryDeferred(now: Date): Promise<number>;
  /**
   * Parked requests of concurrency key pools that have room (a slot given back while a round parked,
   * a limit raised, a key resumed) become due now, as many as there is room for; and the first task
   * waiting for a singleton key whose holder has finished (core/tasks/taskKeys.ts); how many.
   */
  unparkWithRoom(now: Date, only?: { tenantId: string; name: string; value: string }[]): Promise<number>;
  /**
   * Sessions to reap: live ones whose last heartbeat is older than `before`, and ended ones that still
   * hold open attempts.
   */
  lostWorkers(before: Date): Promise<string[]>;
  /**
   * Attempts a worker holds whose step attempt is still open, and those of map items still running
   * (with the map step and the item's index).
   */
  openAttempts(workerId: string): Promise<OpenAttempt[]>;
}

/** An attempt a worker session holds, as the database has it: the step's (or a map item's), and since when. */
export interface OpenAttempt {
  attemptId: string;
  taskId: string;
  item: { stepId: string; index: number } | null;
  startedAt: Date;
}

/** The workers as read a moment ago (see CandidateSnapshot), or null when there is no fresh view. */
export interface CandidateSource {
  current(): WorkerCandidate[] | null;
}

/** A session's operator drain: its DRAIN command and audit record (`repeated`: written by an earlier call). */
export interface DrainOutcome {
  commandId: string;
  auditId: string;
  repeated: boolean;
}

/** The operator's actions on nodes and on a session's placement, each audited in its transaction. */
/** What a cordon or uncordon did: the audit record that stands for it, and whether it was a repeat. */
export interface StatusChange {
  auditId: string;
  repeated: boolean;
}

export interface OperatorWorkerStore {
  /**
   * Cordons the node (placed on no more) and drains each of its live sessions not drained yet (DRAINING,
   * a DRAIN command each, made by `command`); one audit record names them. A node drained already, with no
   * session left to drain, writes nothing and answers the earlier drain. Null when there is no such node.
   */
  drainNode(
    nodeId: string,
    command: (workerId: string) => WorkerCommandRecord,
    audit: OperatorAuditRecord,
  ): Promise<{
    auditId: string;
    workers: { workerId: string; commandId: string }[];
    sent: WorkerCommandRecord[];
  } | null>;
  /**
   * Sets a live session's scheduling status (INELIGIBLE: placed on no more) with its audit record; null
   * when there is no live session. Asked for the status it has, it writes nothing and answers the audit
   * record of the action that set it (writing this one only when there is none).
   */
  setWorkerScheduling(
    workerId: string,
    status: 'ELIGIBLE' | 'INELIGIBLE',
    audit: OperatorAuditRecord,
  ): Promise<StatusChange | null>;
  /** Sets a node's management status (ACTIVE also forgets a drain), the same way; null: no such node. */
  setNodeStatus(
    nodeId: string,
    status: 'ACTIVE' | 'CORDONED',
    audit: OperatorAuditRecord,
  ): Promise<StatusChange | null>;
}

/** A concurrency key of a tenant as applications and operators see it. */
export interface ConcurrencyKeyView {
  name: string;
  /** The limit set at run time; null: the declared one applies. */
  limit: number | null;
  /** The limit the tenant's latest definitions declare (null: none declares it any more). */
  declaredLimit: number | null;
  /** A rate limit's interval (its limit is starts per interval); null: a concurrency key. */
  intervalMs: number | null;
  paused: boolean;
  /** Steps holding a slot now, over all the key's pools. */
  running: number;
  /** Steps parked on the key's pools. */
  waiting: number;
}

/** What a fair-share weight weighs: a tenant, an application, or one fairness key of an application. */
export type WeightScope = 'tenant' | 'application' | 'key';

export interface SchedulingControlStore {
  /** Every key the tenant's definitions declare or that has a setting. */
  keys(tenantId: string): Promise<ConcurrencyKeyView[]>;
  /**
   * Changes a key the tenant declares (null: none), with the operator's audit if any, in one
   * transaction; parked steps of its pools become due so placement counts them again.
   */
  changeKey(
    tenantId: string,
    name: string,
    change: { limit?: number | null; paused?: boolean },
    at: Date,
    audit: ((before: ConcurrencyKeyView, after: ConcurrencyKeyView) => OperatorAuditRecord | null) | null,
  ): Promise<ConcurrencyKeyView | null>;
  /** The tenant of a tenant or application that exists; null: none. */
  tenantOf(scope: 'tenant' | 'application', id: string): Promise<string | null>;
  /** `id`: a tenant's or application's id, or for a fairness key `<application id>:<key>`. */
  setWeight(
    scope: WeightScope,
    id: string,
    weight: number,
    at: Date,
    audit: OperatorAuditRecord,
  ): Promise<void>;
  /**
   * Sets an application's tasks-in-flight quota (null: removes it, the platform's setting applies) and
   * writes the audit made from the quota it had, in one transaction.
   */
  setQuota(
    applicationId: string,
    tasksInFlight: number | null,
    at: Date,
    audit: (before: number | null) => OperatorAuditRecord,
  ): Promise<void>;
}
