import type {
  AttemptRecord,
  DedupRecord,
  FactWrite,
  HeartbeatProbe,
  HeartbeatUpdate,
  StatusStore,
  StatusTransaction,
} from '../../../core/status/ports.ts';
import type {
  AclEntry,
  RealtimeRecord,
  StepRecord,
  TaskEventRecord,
  TaskState,
  WorkflowRecord,
} from '../../../core/tasks/model.ts';
import type { IdempotencyRecord } from '../../../core/tasks/ports.ts';
import type { Queryable, Sql, TxSql } from './database.ts';
import {
  type ExecutionRow,
  heartbeatDeadline,
  type StepRow,
  type TaskRow,
  toExecution,
  toStep,
  toTask,
  toWorkflow,
  type WorkflowRow,
} from './rows.ts';

/** Reads a task with its current execution and all step rows of that execution. */
export async function loadTaskState(sql: Queryable, task: TaskRow, withAcl = false): Promise<TaskState> {
  const [[execution], steps, acl] = await Promise.all([
    sql<ExecutionRow[]>`SELECT * FROM execution WHERE id = ${task.current_execution_id}`,
    sql<StepRow[]>`SELECT * FROM step WHERE execution_id = ${task.current_execution_id} ORDER BY id`,
    withAcl ? readAcl(sql, task.id) : Promise.resolve(undefined),
  ]);
  if (!execution) throw new Error(`task ${task.id} has no execution ${task.current_execution_id}`);
  return {
    task: toTask(task),
    execution: toExecution(execution),
    steps: steps.map(toStep),
    ...(acl ? { acl } : {}),
  };
}

async function readAcl(sql: Queryable, taskId: string): Promise<AclEntry[]> {
  const rows = await sql<
    { principal_type: AclEntry['principalType']; principal_id: string; permission: AclEntry['permission'] }[]
  >`
    SELECT principal_type, principal_id, permission FROM task_acl WHERE task_id = ${taskId} AND revoked_at IS NULL`;
  return rows.map((r) => ({
    principalType: r.principal_type,
    principalId: r.principal_id,
    permission: r.permission,
  }));
}

function insertStep(sql: TxSql, s: StepRecord) {
  return sql`
    INSERT INTO step (id, task_id, execution_id, step_key, attempt, client_step_key, capability, capability_version,
                      operation_code, operation_definition_version, expected_producer, failure_policy, depends_on, dynamic,
                      parent_attempt_id, depth, display_name, attempt_id, current, status, business_status, phase_code,
                      phase_label, progress, health, source_seqs, heartbeat_interval_seconds, heartbeat_timeout_seconds,
                      last_heartbeat_seq, last_heartbeat_at, heartbeat_deadline_at, stale_since, data_schema, state_data,
                      started_at, finished_at, duration_ms, duration_source, error, version, created_at, updated_at)
    VALUES (${s.id}, ${s.taskId}, ${s.executionId}, ${s.key}, ${s.attempt}, ${s.clientStepKey}, ${s.capability},
            ${s.capabilityVersion}, ${s.operationCode}, ${s.operationDefinitionVersion}, ${s.expectedProducer},
            ${s.failurePolicy}, ${s.dependsOn}::text[], ${s.dynamic}, ${s.parentAttemptId}, ${s.depth}, ${s.displayName},
            ${s.attemptId}, ${s.current}, ${s.status}, ${s.businessStatus}, ${s.phaseCode}, ${s.phaseLabel},
            ${s.progress ? sql.json(s.progress as never) : null}, ${s.health}, ${sql.json(s.sourceSeqs)},
            ${s.heartbeatIntervalSeconds}, ${s.heartbeatTimeoutSeconds}, ${s.lastHeartbeatSeq}, ${s.lastHeartbeatAt},
            ${heartbeatDeadline(s)}, ${s.staleSince}, ${s.dataSchema},
            ${s.stateData === null || s.stateData === undefined ? null : sql.json(s.stateData as never)},
            ${s.startedAt}, ${s.finishedAt}, ${s.durationMs}, ${s.durationSource},
            ${s.error ? sql.json(s.error as never) : null}, ${s.version}, ${s.createdAt}, ${s.updatedAt})`;
}

function updateStep(sql: TxSql, s: StepRecord) {
  return sql`
    UPDATE step SET
      attempt_id = ${s.attemptId}, current = ${s.current}, status = ${s.status}, business_status = ${s.businessStatus},
      phase_code = ${s.phaseCode}, phase_label = ${s.phaseLabel},
      progress = ${s.progress ? sql.json(s.progress as never) : null}, health = ${s.health},
      source_seqs = ${sql.json(s.sourceSeqs)}, operation_definition_version = ${s.operationDefinitionVersion},
      expected_producer = ${s.expectedProducer},
      heartbeat_interval_seconds = ${s.heartbeatIntervalSeconds}, heartbeat_timeout_seconds = ${s.heartbeatTimeoutSeconds},
      last_heartbeat_seq = ${s.lastHeartbeatSeq}, last_heartbeat_at = ${s.lastHeartbeatAt},
      heartbeat_deadline_at = ${heartbeatDeadline(s)}, stale_since = ${s.staleSince}, data_schema = ${s.dataSchema},
      state_data = ${s.stateData === null || s.stateData === undefined ? null : sql.json(s.stateData as never)},
      started_at = ${s.startedAt}, finished_at = ${s.finishedAt}, duration_ms = ${s.durationMs},
      duration_source = ${s.durationSource}, error = ${s.error ? sql.json(s.error as never) : null},
      version = ${s.version}, updated_at = ${s.updatedAt}
    WHERE id = ${s.id}`;
}

function insertEvent(sql: TxSql, e: TaskEventRecord, committedAt: Date) {
  return sql`
    INSERT INTO task_event (id, task_id, execution_id, task_version, type, producer, payload, occurred_at, committed_at,
                            workflow_id, step_key, step_attempt, attempt_id, step_version, task_attempt, operation_code,
                            source_seq, lifecycle_status, business_status, health, phase_code, data_schema, error_code,
                            received_at, duration_ms)
    VALUES (${e.id}, ${e.taskId}, ${e.executionId}, ${e.taskVersion}, ${e.type}, ${e.producer},
            ${sql.json(e.payload as never)}, ${e.occurredAt}, ${committedAt}, ${e.workflowId}, ${e.stepKey},
            ${e.stepAttempt}, ${e.attemptId}, ${e.stepVersion}, ${e.taskAttempt}, ${e.operationCode}, ${e.sourceSeq},
            ${e.lifecycleStatus}, ${e.businessStatus}, ${e.health}, ${e.phaseCode}, ${e.dataSchema}, ${e.errorCode},
            ${e.receivedAt}, ${e.durationMs})`;
}

function insertRealtime(sql: TxSql, rows: RealtimeRecord[]) {
  return sql`
    INSERT INTO realtime_outbox (id, tenant_id, aggregate_type, aggregate_id, aggregate_version, channel, projection,
                                 payload, available_at, created_at)
    SELECT id, tenant_id, aggregate_type, aggregate_id, aggregate_version, channel, projection, payload::jsonb,
           created_at, created_at
    FROM unnest(${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => r.tenantId)}::uuid[],
                ${rows.map((r) => r.aggregateType)}::text[], ${rows.map((r) => r.aggregateId)}::uuid[],
                ${rows.map((r) => r.aggregateVersion.toString())}::bigint[], ${rows.map((r) => r.channel)}::text[],
                ${rows.map((r) => r.projection)}::text[], ${rows.map((r) => JSON.stringify(r.payload))}::text[],
                ${rows.map((r) => r.createdAt.toISOString())}::timestamptz[])
         AS r(id, tenant_id, aggregate_type, aggregate_id, aggregate_version, channel, projection, payload, created_at)`;
}

function upsertTask(sql: TxSql, t: TaskState['task'], insert: boolean) {
  if (insert) {
    return sql`
      INSERT INTO task (id, tenant_id, application_id, workflow_id, client_task_key, workflow_definition_id, workflow_name,
                        workflow_version, name, external_ref, input, callback_url, priority, owner_id, task_type, product_id,
                        status_definition_version, lifecycle_status, business_status, health, failure,
                        coordinator_source_seq, dynamic_policy, dynamic_step_count, version, current_execution_id,
                        created_at, updated_at, started_at, finished_at, duration_ms, events_pruned_before)
      VALUES (${t.id}, ${t.tenantId}, ${t.applicationId}, ${t.workflowId}, ${t.clientTaskKey}, ${t.workflowDefinitionId},
              ${t.workflowName}, ${t.workflowVersion}, ${t.name}, ${t.externalRef}, ${sql.json(t.input as never)},
              ${t.callbackUrl}, ${t.priority}, ${t.ownerId}, ${t.taskType}, ${t.productId}, ${t.statusDefinitionVersion},
              ${t.lifecycleStatus}, ${t.businessStatus}, ${t.health}, ${t.failure ? sql.json(t.failure as never) : null},
              ${t.coordinatorSourceSeq}, ${sql.json(t.dynamicPolicy as never)}, ${t.dynamicStepCount}, ${t.version},
              ${t.currentExecutionId}, ${t.createdAt}, ${t.updatedAt}, ${t.startedAt}, ${t.finishedAt}, ${t.durationMs},
              ${t.eventsPrunedBefore})`;
  }
  return sql`
    UPDATE task SET
      task_type = ${t.taskType}, product_id = ${t.productId}, status_definition_version = ${t.statusDefinitionVersion},
      lifecycle_status = ${t.lifecycleStatus}, business_status = ${t.businessStatus}, health = ${t.health},
      failure = ${t.failure ? sql.json(t.failure as never) : null}, coordinator_source_seq = ${t.coordinatorSourceSeq},
      dynamic_step_count = ${t.dynamicStepCount}, version = ${t.version}, current_execution_id = ${t.currentExecutionId},
      updated_at = ${t.updatedAt}, started_at = ${t.startedAt}, finished_at = ${t.finishedAt}, duration_ms = ${t.durationMs}
    WHERE id = ${t.id}`;
}

function upsertExecution(sql: TxSql, e: TaskState['execution'], insert: boolean) {
  if (insert) {
    return sql`
      INSERT INTO execution (id, task_id, number, status, progress, snapshot, version, callback_sequence, created_at,
                             started_at, completed_at, updated_at)
      VALUES (${e.id}, ${e.taskId}, ${e.number}, ${e.status}, ${e.progress}, ${sql.json(e.snapshot as never)}, ${e.version},
              ${e.callbackSequence}, ${e.createdAt}, ${e.startedAt}, ${e.completedAt}, ${e.updatedAt})`;
  }
  return sql`
    UPDATE execution SET status = ${e.status}, progress = ${e.progress}, version = ${e.version}, started_at = ${e.startedAt},
                         completed_at = ${e.completedAt}, updated_at = ${e.updatedAt}, callback_sequence = ${e.callbackSequence}
    WHERE id = ${e.id}`;
}

function upsertWorkflow(sql: TxSql, w: WorkflowRecord, insert: boolean) {
  if (insert) {
    return sql`
      INSERT INTO workflow (id, tenant_id, application_id, client_workflow_key, owner_id, title, workflow_type,
                            lifecycle_status, version, task_count, task_counts, request_hash, created_at, updated_at)
      VALUES (${w.id}, ${w.tenantId}, ${w.applicationId}, ${w.clientWorkflowKey}, ${w.ownerId}, ${w.title}, ${w.workflowType},
              ${w.lifecycleStatus}, ${w.version}, ${w.taskCount}, ${sql.json(w.taskCounts as never)}, ${w.requestHash},
              ${w.createdAt}, ${w.updatedAt})`;
  }
  return sql`
    UPDATE workflow SET lifecycle_status = ${w.lifecycleStatus}, version = ${w.version}, task_count = ${w.taskCount},
                        task_counts = ${sql.json(w.taskCounts as never)}, updated_at = ${w.updatedAt}
    WHERE id = ${w.id}`;
}

export interface AttemptRow {
  id: string;
  task_id: string;
  step_id: string;
  application_id: string;
  operation_code: string;
  producer_id: string;
  allowed_event_types: string[];
  handle_hash: Buffer;
  handle_sealed: string;
  worker_id: string | null;
  lease_version: number;
  expires_at: Date;
  revoked_at: Date | null;
  created_at: Date;
}

export const toAttempt = (row: AttemptRow): AttemptRecord => ({
  id: row.id,
  taskId: row.task_id,
  stepId: row.step_id,
  applicationId: row.application_id,
  operationCode: row.operation_code,
  producerId: row.producer_id,
  allowedEventTypes: row.allowed_event_types,
  handleHash: row.handle_hash,
  handleSealed: row.handle_sealed,
  workerId: row.worker_id,
  leaseVersion: row.lease_version,
  expiresAt: row.expires_at,
  revokedAt: row.revoked_at,
  createdAt: row.created_at,
});

class PostgresStatusTransaction implements StatusTransaction {
  constructor(private readonly sql: TxSql) {}

  async claimSchedulingRequests(now: Date, limit: number) {
    const rows = await this.sql<{ id: string; task_id: string; step_id: string }[]>`
      SELECT id, task_id, step_id FROM scheduling_request
      WHERE status = 'PENDING' AND available_at <= ${now}
      ORDER BY priority DESC, created_at
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED`;
    return rows.map((r) => ({ id: r.id, taskId: r.task_id, stepId: r.step_id }));
  }

  async deferSchedulingRequest(id: string, reasons: string[], availableAt: Date) {
    await this.sql`
      UPDATE scheduling_request SET reasons = ${this.sql.json(reasons)}, available_at = ${availableAt}, updated_at = ${availableAt}
      WHERE id = ${id}`;
  }

  async advisoryLock(key: string) {
    await this.sql`SELECT pg_advisory_xact_lock(hashtext(${key}))`;
  }

  async lockTask(taskId: string): Promise<TaskState | null> {
    const [task] = await this.sql<TaskRow[]>`SELECT * FROM task WHERE id = ${taskId} FOR UPDATE`;
    return task ? loadTaskState(this.sql, task, true) : null;
  }

  async lockTaskIfFree(taskId: string): Promise<TaskState | null> {
    const [task] = await this.sql<TaskRow[]>`SELECT * FROM task WHERE id = ${taskId} FOR UPDATE SKIP LOCKED`;
    return task ? loadTaskState(this.sql, task, true) : null;
  }

  async lockWorkflow(workflowId: string): Promise<WorkflowRecord | null> {
    const [row] = await this.sql<WorkflowRow[]>`SELECT * FROM workflow WHERE id = ${workflowId} FOR UPDATE`;
    return row ? toWorkflow(row) : null;
  }

  async findWorkflowByKey(applicationId: string, key: string): Promise<WorkflowRecord | null> {
    const [row] = await this.sql<WorkflowRow[]>`
      SELECT * FROM workflow WHERE application_id = ${applicationId} AND client_workflow_key = ${key}`;
    return row ? toWorkflow(row) : null;
  }

  async findTaskIdByClientKey(workflowId: string, clientTaskKey: string): Promise<string | null> {
    const [row] = await this.sql<{ id: string }[]>`
      SELECT id FROM task WHERE workflow_id = ${workflowId} AND client_task_key = ${clientTaskKey}`;
    return row?.id ?? null;
  }

  async findDedup(eventId: string): Promise<DedupRecord | null> {
    const [row] = await this.sql<
      {
        event_id: string;
        task_id: string;
        payload_hash: string;
        result: Record<string, unknown>;
        created_at: Date;
      }[]
    >`
      SELECT * FROM event_dedup WHERE event_id = ${eventId}`;
    return row
      ? {
          eventId: row.event_id,
          taskId: row.task_id,
          payloadHash: row.payload_hash,
          result: row.result,
          createdAt: row.created_at,
        }
      : null;
  }

  async findAttempt(attemptId: string): Promise<AttemptRecord | null> {
    const [row] = await this.sql<AttemptRow[]>`SELECT * FROM attempt WHERE id = ${attemptId}`;
    return row ? toAttempt(row) : null;
  }

  async findAttemptByHandle(handleHash: Buffer): Promise<AttemptRecord | null> {
    const [row] = await this.sql<AttemptRow[]>`SELECT * FROM attempt WHERE handle_hash = ${handleHash}`;
    return row ? toAttempt(row) : null;
  }

  async acl(taskId: string): Promise<AclEntry[]> {
    const rows = await this.sql<
      {
        principal_type: AclEntry['principalType'];
        principal_id: string;
        permission: AclEntry['permission'];
      }[]
    >`
      SELECT principal_type, principal_id, permission FROM task_acl WHERE task_id = ${taskId} AND revoked_at IS NULL`;
    return rows.map((r) => ({
      principalType: r.principal_type,
      principalId: r.principal_id,
      permission: r.permission,
    }));
  }

  async countRegistrationsSince(taskId: string, since: Date): Promise<number> {
    const [row] = await this.sql<{ n: bigint }[]>`
      SELECT count(*) AS n FROM step WHERE task_id = ${taskId} AND dynamic AND created_at > ${since}`;
    return Number(row?.n ?? 0);
  }

  async findIdempotency(
    principal: string,
    operation: string,
    key: string,
  ): Promise<IdempotencyRecord | null> {
    const [row] = await this.sql<
      { request_hash: string; response_status: number; response_body: unknown; created_at: Date }[]
    >`
      SELECT request_hash, response_status, response_body, created_at FROM idempotency
      WHERE principal = ${principal} AND operation = ${operation} AND key = ${key}`;
    return row
      ? {
          principal,
          operation,
          key,
          requestHash: row.request_hash,
          responseStatus: row.response_status,
          responseBody: row.response_body,
          createdAt: row.created_at,
        }
      : null;
  }

  async write(w: FactWrite): Promise<{ idempotencyClaimed: boolean }> {
    const sql = this.sql;
    // Facts are committed at the time their session started (the injected clock); revocations too.
    const committedAt = w.events[0]?.receivedAt ?? null;
    // Sent back to back (pipelined); the server runs them in this order inside the transaction.
    const statements: Promise<unknown>[] = [];
    const idempotency = w.idempotency
      ? sql`
          INSERT INTO idempotency (principal, operation, key, request_hash, response_status, response_body, created_at)
          VALUES (${w.idempotency.principal}, ${w.idempotency.operation}, ${w.idempotency.key}, ${w.idempotency.requestHash},
                  ${w.idempotency.responseStatus}, ${sql.json(w.idempotency.responseBody as never)}, ${w.idempotency.createdAt})
          ON CONFLICT DO NOTHING RETURNING 1`
      : null;
    if (idempotency) statements.push(idempotency);
    if (w.newWorkflow) statements.push(upsertWorkflow(sql, w.newWorkflow, true));
    if (w.workflow) statements.push(upsertWorkflow(sql, w.workflow, false));
    if (w.newTask) {
      statements.push(upsertTask(sql, w.newTask.task, true), upsertExecution(sql, w.newTask.execution, true));
    }
    if (w.newExecution) statements.push(upsertExecution(sql, w.newExecution, true));
    if (w.task) statements.push(upsertTask(sql, w.task, false));
    if (w.execution) statements.push(upsertExecution(sql, w.execution, false));
    for (const step of w.newSteps ?? []) statements.push(insertStep(sql, step));
    for (const step of w.steps ?? []) statements.push(updateStep(sql, step));
    for (const a of w.attempts ?? []) {
      statements.push(sql`
        INSERT INTO attempt (id, task_id, step_id, application_id, operation_code, producer_id, allowed_event_types,
                             handle_hash, handle_sealed, worker_id, lease_version, expires_at, revoked_at, created_at)
        VALUES (${a.id}, ${a.taskId}, ${a.stepId}, ${a.applicationId}, ${a.operationCode}, ${a.producerId},
                ${a.allowedEventTypes}::text[], ${a.handleHash}, ${a.handleSealed}, ${a.workerId}, ${a.leaseVersion},
                ${a.expiresAt}, ${a.revokedAt}, ${a.createdAt})
        ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at`);
    }
    if (w.revokeAttemptIds && w.revokeAttemptIds.length > 0 && committedAt) {
      statements.push(sql`
        UPDATE attempt SET revoked_at = coalesce(revoked_at, ${committedAt}) WHERE id = ANY(${w.revokeAttemptIds}::uuid[])`);
    }
    for (const event of w.events) statements.push(insertEvent(sql, event, event.receivedAt));
    for (const d of w.dedup ?? []) {
      statements.push(sql`
        INSERT INTO event_dedup (event_id, task_id, payload_hash, result, created_at)
        VALUES (${d.eventId}, ${d.taskId}, ${d.payloadHash}, ${sql.json(d.result as never)}, ${d.createdAt})`);
    }
    if (w.outbox.length > 0) {
      statements.push(sql`
        INSERT INTO outbox_event (id, tenant_id, application_id, aggregate_id, event_type, payload, available_at, created_at)
        SELECT id, tenant_id, application_id, aggregate_id, event_type, payload::jsonb, created_at, created_at
        FROM unnest(${w.outbox.map((r) => r.id)}::uuid[], ${w.outbox.map((r) => r.tenantId)}::uuid[],
                    ${w.outbox.map((r) => r.applicationId)}::uuid[], ${w.outbox.map((r) => r.aggregateId)}::uuid[],
                    ${w.outbox.map((r) => r.eventType)}::text[], ${w.outbox.map((r) => JSON.stringify(r.payload))}::text[],
                    ${w.outbox.map((r) => r.createdAt.toISOString())}::timestamptz[])
             AS o(id, tenant_id, application_id, aggregate_id, event_type, payload, created_at)`);
    }
    if (w.realtime.length > 0) statements.push(insertRealtime(sql, w.realtime));
    for (const r of w.schedulingRequests ?? []) {
      statements.push(sql`
        INSERT INTO scheduling_request (id, task_id, step_id, priority, available_at, created_at, updated_at)
        VALUES (${r.id}, ${r.taskId}, ${r.stepId}, ${r.priority}, ${r.availableAt}, ${r.createdAt}, ${r.createdAt})
        ON CONFLICT (step_id) DO NOTHING`);
    }
    if (w.closeSchedulingRequests && w.closeSchedulingRequests.stepIds.length > 0) {
      statements.push(sql`
        UPDATE scheduling_request SET status = ${w.closeSchedulingRequests.status}, updated_at = now()
        WHERE step_id = ANY(${w.closeSchedulingRequests.stepIds}::uuid[]) AND status = 'PENDING'`);
    }
    for (const c of w.workerCommands ?? []) {
      statements.push(sql`
        INSERT INTO worker_command (id, worker_id, type, payload, created_at)
        VALUES (${c.id}, ${c.workerId}, ${c.type}, ${sql.json(c.payload as never)}, ${c.createdAt})`);
    }
    for (const load of w.workerLoad ?? []) {
      statements.push(sql`
        UPDATE worker SET running_attempts = greatest(0, running_attempts + ${load.delta}) WHERE id = ${load.workerId}`);
    }
    for (const t of w.timers ?? []) {
      statements.push(sql`
        INSERT INTO timer (id, kind, task_id, step_id, payload, available_at, created_at)
        VALUES (${t.id}, ${t.kind}, ${t.taskId}, ${t.stepId}, ${sql.json(t.payload as never)}, ${t.availableAt}, ${t.createdAt})`);
    }
    for (const c of w.callbacks ?? []) {
      statements.push(sql`
        INSERT INTO callback_delivery (id, application_id, task_id, execution_id, sequence, event_id, event_type, url,
                                       payload, available_at, created_at)
        VALUES (${c.id}, ${c.applicationId}, ${c.taskId}, ${c.executionId}, ${c.sequence}, ${c.eventId}, ${c.eventType},
                ${c.url}, ${sql.json(c.payload as never)}, ${c.createdAt}, ${c.createdAt})`);
    }
    for (const m of w.timeline ?? []) {
      statements.push(sql`
        INSERT INTO timeline (id, task_id, execution_id, kind, message, data, at)
        VALUES (${m.id}, ${m.taskId}, ${m.executionId}, ${m.kind}, ${m.message}, ${sql.json(m.data as never)}, ${m.at})`);
    }
    await Promise.all(statements);
    return { idempotencyClaimed: idempotency ? (await idempotency).length > 0 : true };
  }
}

const retryableCodes = new Set(['40P01', '40001']);

export class PostgresStatusStore implements StatusStore {
  constructor(private readonly sql: Sql) {}

  async renewLeases(updates: HeartbeatUpdate[], now: Date): Promise<Set<string>> {
    const rows = await this.sql<{ attempt_id: string }[]>`
      UPDATE step SET last_heartbeat_seq = x.seq, last_heartbeat_at = ${now},
                      heartbeat_deadline_at = ${now}::timestamptz + make_interval(secs => step.heartbeat_timeout_seconds)
      FROM (SELECT DISTINCT ON (attempt_id) attempt_id, seq
            FROM unnest(${updates.map((u) => u.attemptId)}::uuid[], ${updates.map((u) => String(u.heartbeatSeq))}::bigint[])
                 AS u(attempt_id, seq)
            ORDER BY attempt_id, seq DESC) AS x
      WHERE step.attempt_id = x.attempt_id AND step.status = 'RUNNING' AND step.health = 'HEALTHY' AND step.current
        AND step.last_heartbeat_seq < x.seq
      RETURNING step.attempt_id`;
    return new Set(rows.map((r) => r.attempt_id));
  }

  async probeAttempts(attemptIds: string[]): Promise<HeartbeatProbe[]> {
    const rows = await this.sql<
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
      SELECT s.attempt_id, s.task_id, s.status, s.health, s.current, s.last_heartbeat_seq,
             (t.current_execution_id = s.execution_id) AS execution_is_current
      FROM step s JOIN task t ON t.id = s.task_id
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

  async attemptsByHandle(hashes: Buffer[]): Promise<AttemptRecord[]> {
    const rows = await this.sql<AttemptRow[]>`
      SELECT * FROM attempt
      WHERE handle_hash IN (SELECT decode(h, 'hex') FROM unnest(${hashes.map((h) => h.toString('hex'))}::text[]) AS h)`;
    return rows.map(toAttempt);
  }

  async attemptsById(ids: string[]): Promise<AttemptRecord[]> {
    const rows = await this.sql<AttemptRow[]>`SELECT * FROM attempt WHERE id = ANY(${ids}::uuid[])`;
    return rows.map(toAttempt);
  }

  async overdueTasks(now: Date, limit: number): Promise<string[]> {
    const rows = await this.sql<{ task_id: string }[]>`
      SELECT DISTINCT task_id FROM (
        SELECT task_id FROM step
        WHERE status = 'RUNNING' AND health = 'HEALTHY' AND heartbeat_deadline_at <= ${now}
        ORDER BY heartbeat_deadline_at LIMIT ${limit}) AS due`;
    return rows.map((r) => r.task_id);
  }

  async transaction<T>(work: (tx: StatusTransaction) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return (await this.sql.begin((sql) => work(new PostgresStatusTransaction(sql)))) as T;
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (attempt >= 5 || !code || !retryableCodes.has(code)) throw error;
      }
    }
  }
}
