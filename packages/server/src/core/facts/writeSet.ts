/**
 * The write set: every row one fact (or a batch of facts) writes, table by table. The fact session builds
 * it and the store sends it in one round of statements, each row in its last state.
 */
import type { NotificationRecord } from './notifications.ts';
import type {
  AclEntry,
  AttemptRecord,
  CallbackRecord,
  DedupRecord,
  ExecutionRecord,
  IdempotencyRecord,
  MapItemRecord,
  OperatorAuditRecord,
  OutboxRecord,
  RealtimeRecord,
  SchedulingRequestRecord,
  StepDecisionRecord,
  StepRecord,
  TaskEventRecord,
  TaskRecord,
  TimelineRecord,
  TimerRecord,
  WorkerCommandRecord,
  WorkflowRecord,
} from './records.ts';

/** Everything one fact (or one creation) writes; the store sends it in one round of statements. */
export interface FactWriteSet {
  /** Claimed in the same round; a key already taken fails the transaction (unique violation). */
  idempotency?: IdempotencyRecord;
  newWorkflow?: WorkflowRecord;
  newTask?: { task: TaskRecord; execution: ExecutionRecord };
  /** ACL grants of a task created with this fact (a child task inherits its parent's). */
  newAcl?: { taskId: string; entries: AclEntry[]; createdAt: Date };
  /**
   * VIEW grants to an existing task for principals that do not see it (an approval's approvers): an
   * entry revoked before is granted again, one that is there already is kept as it is.
   */
  aclGrants?: { taskId: string; entries: AclEntry[]; createdAt: Date };
  workflow?: WorkflowRecord;
  task?: TaskRecord;
  execution?: ExecutionRecord;
  /** A further run of an existing task (POST /v1/tasks/{id}:retry). */
  newExecution?: ExecutionRecord;
  newSteps?: StepRecord[];
  steps?: StepRecord[];
  attempts?: AttemptRecord[];
  revokeAttemptIds?: string[];
  events: TaskEventRecord[];
  dedup?: DedupRecord[];
  outbox: OutboxRecord[];
  realtime: RealtimeRecord[];
  schedulingRequests?: SchedulingRequestRecord[];
  /** Scheduling requests that are done: dispatched, or their step no longer needs a worker. */
  closeSchedulingRequests?: { stepIds: string[]; status: 'DISPATCHED' | 'CANCELLED' };
  workerCommands?: WorkerCommandRecord[];
  /** Commands their worker acknowledged along with its events (ids of other workers change nothing). */
  commandAcks?: { workerId: string; commandIds: string[]; at: Date };
  timers?: TimerRecord[];
  /** A map step began: its items 0 … count − 1, written PENDING in one statement. */
  newMapItems?: { stepId: string; count: number; at: Date }[];
  /** Items that changed (placed, finished, waiting for a retry). */
  mapItems?: MapItemRecord[];
  /**
   * Map steps that ended: their open items are CANCELLED and the attempts of the running ones revoked, in
   * one statement each (items this write set changes itself keep their own state).
   */
  closeMapItems?: { stepIds: string[]; at: Date };
  /** A map's request for placement made due again (its row exists: one per step), or created. */
  reopenSchedulingRequests?: SchedulingRequestRecord[];
  callbacks?: CallbackRecord[];
  timeline?: TimelineRecord[];
  /** Decisions on approval steps (inserted, never changed). */
  stepDecisions?: StepDecisionRecord[];
  /** Operator actions this fact carries out (an administrator's correction), audited with it. */
  operatorAudit?: OperatorAuditRecord[];
  /** Offline notifications of this fact (notifications.ts); a key already written is skipped. */
  notifications?: NotificationRecord[];
}
