/**
 * The step rows (one per attempt of a step of an execution): their columns, row mapper and statements,
 * and the heartbeat path's probe of them (outside any transaction; the leases are in leaseTables).
 */
import type { StepRecord } from '../../../core/facts/records.ts';
import type { HeartbeatProbe } from '../../../core/status/ports.ts';
import type { Sql } from './database.ts';
import { leaseOfStep } from './leaseTables.ts';
import type { MergedWrites } from './mergeWrites.ts';
import {
  type Column,
  insertStatement,
  type RowStatement,
  type RowValue,
  updateStatement,
} from './recordset.ts';
import { heartbeatDeadline } from './rows.ts';

const stepColumns: Column[] = [
  ['id', 'uuid'],
  ['task_id', 'uuid'],
  ['execution_id', 'uuid'],
  ['step_key', 'text'],
  ['attempt', 'integer'],
  ['client_step_key', 'text'],
  ['capability', 'text'],
  ['capability_version', 'text'],
  ['operation_code', 'text'],
  ['operation_definition_version', 'integer'],
  ['expected_producer', 'text'],
  ['failure_policy', 'text'],
  ['depends_on', 'text[]'],
  ['dynamic', 'boolean'],
  ['parent_attempt_id', 'uuid'],
  ['depth', 'integer'],
  ['display_name', 'text'],
  ['attempt_id', 'uuid'],
  ['current', 'boolean'],
  ['status', 'text'],
  ['business_status', 'text'],
  ['phase_code', 'text'],
  ['phase_label', 'text'],
  ['progress', 'jsonb'],
  ['health', 'text'],
  ['source_seqs', 'jsonb'],
  ['heartbeat_interval_seconds', 'integer'],
  ['heartbeat_timeout_seconds', 'integer'],
  ['last_heartbeat_seq', 'bigint'],
  ['last_heartbeat_at', 'timestamptz'],
  ['heartbeat_deadline_at', 'timestamptz'],
  ['stale_since', 'timestamptz'],
  ['data_schema', 'text'],
  ['state_data', 'jsonb'],
  ['started_at', 'timestamptz'],
  ['finished_at', 'timestamptz'],
  ['duration_ms', 'bigint'],
  ['duration_source', 'text'],
  ['error', 'jsonb'],
  ['reused_from_execution_id', 'uuid'],
  ['waiting_for', 'jsonb'],
  ['version', 'bigint'],
  ['created_at', 'timestamptz'],
  ['updated_at', 'timestamptz'],
];

/** What a fact may change on an existing step row (its identity and definition stay). */
const stepUpdateColumns = stepColumns.filter(
  ([name]) =>
    ![
      'task_id',
      'execution_id',
      'step_key',
      'attempt',
      'client_step_key',
      'capability',
      'capability_version',
      'operation_code',
      'failure_policy',
      'depends_on',
      'dynamic',
      'parent_attempt_id',
      'depth',
      'display_name',
      'created_at',
    ].includes(name),
);

const stepRow = (s: StepRecord): Record<string, RowValue> => ({
  id: s.id,
  task_id: s.taskId,
  execution_id: s.executionId,
  step_key: s.key,
  attempt: s.attempt,
  client_step_key: s.clientStepKey,
  capability: s.capability,
  capability_version: s.capabilityVersion,
  operation_code: s.operationCode,
  operation_definition_version: s.operationDefinitionVersion,
  expected_producer: s.expectedProducer,
  failure_policy: s.failurePolicy,
  depends_on: s.dependsOn,
  dynamic: s.dynamic,
  parent_attempt_id: s.parentAttemptId,
  depth: s.depth,
  display_name: s.displayName,
  attempt_id: s.attemptId,
  current: s.current,
  status: s.status,
  business_status: s.businessStatus,
  phase_code: s.phaseCode,
  phase_label: s.phaseLabel,
  progress: s.progress ?? null,
  health: s.health,
  source_seqs: s.sourceSeqs,
  heartbeat_interval_seconds: s.heartbeatIntervalSeconds,
  heartbeat_timeout_seconds: s.heartbeatTimeoutSeconds,
  last_heartbeat_seq: s.lastHeartbeatSeq,
  last_heartbeat_at: s.lastHeartbeatAt,
  heartbeat_deadline_at: heartbeatDeadline(s),
  stale_since: s.staleSince,
  data_schema: s.dataSchema,
  state_data: (s.stateData ?? null) as RowValue,
  started_at: s.startedAt,
  finished_at: s.finishedAt,
  duration_ms: s.durationMs,
  duration_source: s.durationSource,
  error: s.error ?? null,
  reused_from_execution_id: s.reusedFromExecutionId,
  waiting_for: (s.waitingFor ?? null) as RowValue,
  version: s.version,
  created_at: s.createdAt,
  updated_at: s.updatedAt,
});

/** New steps, then changed ones. */
export function pushStepStatements(w: MergedWrites, statements: RowStatement[]): void {
  if (w.newSteps.length > 0) statements.push(insertStatement('step', stepColumns, w.newSteps.map(stepRow)));
  if (w.steps.length > 0) statements.push(updateStatement('step', stepUpdateColumns, w.steps.map(stepRow)));
}

/** The steps holding the attempts, with whether their execution is still the task's current one. */
export async function probeAttempts(sql: Sql, attemptIds: string[]): Promise<HeartbeatProbe[]> {
  const rows = await sql<
    {
      attempt_id: string;
      task_id: string;
      status: string;
      health: string;
      current: boolean;
      last_heartbeat_seq: bigint;
      execution_is_current: boolean;
    }[]
  >`
      SELECT s.attempt_id, s.task_id, s.status, s.health, s.current,
             greatest(s.last_heartbeat_seq, l.heartbeat_seq) AS last_heartbeat_seq,
             (t.current_execution_id = s.execution_id) AS execution_is_current
      FROM step s JOIN task t ON t.id = s.task_id
           ${sql.unsafe(leaseOfStep)}
      WHERE s.attempt_id = ANY(${attemptIds}::uuid[])`;
  return rows.map((r) => ({
    attemptId: r.attempt_id,
    taskId: r.task_id,
    status: r.status,
    health: r.health,
    current: r.current,
    lastHeartbeatSeq: r.last_heartbeat_seq,
    executionIsCurrent: r.execution_is_current,
  }));
}
