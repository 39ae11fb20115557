/**
 * Status glossary (facts, versions and the coordinator are in core/facts/session.ts; the order of an
 * event's checks is in docs/design/event-validation.md)
 * - execution credential: a signed token or a compact handle bound to task, step, attempt, execution
 *   instance, operation, producer and allowed event types; revoked when the step attempt ends.
 * - registry: versioned status definitions (business status → lifecycle) and operation definitions
 *   (producer, event types, data schemas); a task or step binds one version and keeps it.
 */
import type { LifecycleStatus } from '@tdp/protocol';
import type { FactStore } from '../facts/ports.ts';
import type { AclEntry, AttemptRecord, RealtimeRecord, TaskState, WorkflowRecord } from '../facts/records.ts';
import type { UserView } from '../identity/ports.ts';

/** One heartbeat resolved to its execution instance. */
export interface HeartbeatUpdate {
  attemptId: string;
  heartbeatSeq: number;
}

/** One heartbeat by compact handle, renewed with its lookup (the handle's hash, as hex). */
export interface HandleHeartbeat {
  handleHash: string;
  heartbeatSeq: number;
  /** The executionId the item names, if it names one: the attempt must be that one. */
  executionId: string | null;
}

/** Why a heartbeat did not renew the lease, as the database sees the step attempt. */
export interface HeartbeatProbe {
  attemptId: string;
  taskId: string;
  status: string;
  health: string;
  current: boolean;
  lastHeartbeatSeq: bigint;
  executionIsCurrent: boolean;
}

export interface StatusReads {
  events(
    taskId: string,
    afterTaskVersion: bigint,
    limit: number,
  ): Promise<import('../facts/records.ts').TaskEventRecord[]>;
  /**
   * Tasks a user may see (owner or live ACL) in the tenant — of one application, or of all of them with
   * `applicationId` null — most recently updated first.
   */
  visibleTasks(
    scope: { tenantId: string; applicationId: string | null },
    viewer: Viewer,
    page: { limit: number; before?: { updatedAt: Date; id: string } },
  ): Promise<TaskState[]>;
  canView(taskId: string, viewer: Viewer): Promise<boolean>;
  tasksOf(workflowId: string): Promise<TaskState[]>;
  workflow(workflowId: string): Promise<WorkflowRecord | null>;
  task(taskId: string): Promise<TaskState | null>;
  /** Drops events below `beforeVersion` (retention); reads before it answer EVENTS_PRUNED. */
  pruneEvents(taskId: string, beforeVersion: bigint): Promise<void>;
  /**
   * Grants access and writes `announce(aclVersion)` (the summary for the principal's channel) in one
   * transaction; each grant or revoke of the entry takes the next ACL version.
   */
  grantAcl(
    taskId: string,
    entry: AclEntry,
    at: Date,
    announce: (aclVersion: bigint) => RealtimeRecord[],
  ): Promise<void>;
  /**
   * Revokes access and writes `announce(aclVersion)` (the removal tombstone) in one transaction; false
   * if the principal had no access.
   */
  revokeAcl(
    taskId: string,
    principalType: string,
    principalId: string,
    at: Date,
    announce: (aclVersion: bigint) => RealtimeRecord[],
  ): Promise<boolean>;
  attachExternalRef(
    applicationId: string,
    refType: string,
    refValue: string,
    taskId: string,
    at: Date,
  ): Promise<string>;
  findExternalRef(applicationId: string, refType: string, refValue: string): Promise<string | null>;
}

/** Someone reading on behalf of an end user: the user, and the projects and roles they act in. */
export interface Viewer {
  userId: string;
  projects: string[];
  roles: string[];
}

/** The status context's reads and light writes beside the fact transaction (heartbeats, health). */
export interface StatusStore extends FactStore {
  /**
   * The light heartbeat path: renews the lease of every RUNNING, HEALTHY, current attempt whose sequence
   * rises, in one statement; no version, no event, no message. Returns the attempts it renewed.
   */
  renewLeases(updates: HeartbeatUpdate[], now: Date): Promise<Set<string>>;
  /**
   * The same for heartbeats by handle, found with the application's unexpired attempts in the same
   * statement; for each beat, in order, the attempt it renewed (undefined if none: of two beats of one
   * attempt in a batch, one renews it).
   */
  renewLeasesByHandle(
    applicationId: string,
    beats: HandleHeartbeat[],
    now: Date,
  ): Promise<(string | undefined)[]>;
  probeAttempts(attemptIds: string[]): Promise<HeartbeatProbe[]>;
  attemptsByHandle(hashes: Buffer[]): Promise<AttemptRecord[]>;
  attemptsById(ids: string[]): Promise<AttemptRecord[]>;
  /** Tasks with running, healthy steps past their heartbeat deadline (candidates, not locked). */
  overdueTasks(now: Date, limit: number): Promise<string[]>;
}

/** Claims carried by an execution credential (token or handle). */
export interface ExecutionClaims {
  applicationId: string;
  tenantId: string;
  workflowId: string;
  taskId: string;
  taskAttempt: number;
  stepId: string;
  stepAttempt: number;
  executionId: string;
  operationCode: string;
  producerId: string;
  allowedEventTypes: string[];
  expiresAt: Date;
}

export interface ExecutionCredentials {
  /** A signed token for these claims. */
  sign(claims: ExecutionClaims): Promise<string>;
  /** The claims of a valid, unexpired token; null otherwise. */
  verify(token: string, now: Date): Promise<ExecutionClaims | null>;
  /** A new compact handle (≥ 128 random bits) and the hash to store. */
  newHandle(): { handle: string; hash: Buffer };
  hashHandle(handle: string): Buffer;
  /** The same hash as hex (what a heartbeat batch binds: one call per item, no Buffer). */
  hashHandleHex(handle: string): string;
}

export type LifecycleCounts = Partial<Record<LifecycleStatus, number>>;

/** Short-lived tokens an application's backend obtains for one of its users (reads as that user). */
export interface UserPrincipal {
  kind: 'user';
  applicationId: string;
  tenantId: string;
  /** The API key that minted the token: the token works only while the key does. */
  keyId: string;
  viewer: Viewer;
  /** The user view of the minting application when the token was signed (core/identity/userReach.ts). */
  userView: UserView;
}

export interface UserTokens {
  sign(principal: UserPrincipal, expiresAt: Date): Promise<string>;
  verify(token: string, now: Date): Promise<UserPrincipal | null>;
}
