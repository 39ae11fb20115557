import type { FailurePolicy, StatusDefinitionEntry } from '@tdp/protocol';
import type { OperationDefinition, RegistryStore } from '../../../core/definitions/ports.ts';
import type { OperatorAuditRecord, StatusDefinition } from '../../../core/facts/records.ts';
import { type Sql, transaction } from './database.ts';
import { insertAudit } from './operatorStore.ts';

interface StatusRow {
  application_id: string;
  task_type: string;
  version: number;
  statuses: StatusDefinitionEntry[];
  created_at: Date;
}

interface OperationRow {
  application_id: string;
  operation_code: string;
  version: number;
  display_name: string;
  task_type_pattern: string;
  producer_pattern: string;
  allowed_event_types: string[];
  data_schemas: OperationDefinition['dataSchemas'];
  failure_policy: FailurePolicy;
  created_at: Date;
}

const toStatus = (r: StatusRow): StatusDefinition => ({
  applicationId: r.application_id,
  taskType: r.task_type,
  version: r.version,
  statuses: r.statuses,
  createdAt: r.created_at,
});

const toOperation = (r: OperationRow): OperationDefinition => ({
  applicationId: r.application_id,
  operationCode: r.operation_code,
  version: r.version,
  displayName: r.display_name,
  taskTypePattern: r.task_type_pattern,
  producerPattern: r.producer_pattern,
  allowedEventTypes: r.allowed_event_types,
  dataSchemas: r.data_schemas,
  failurePolicy: r.failure_policy,
  createdAt: r.created_at,
});

export class PostgresRegistryStore implements RegistryStore {
  constructor(private readonly sql: Sql) {}

  async insertStatusDefinition(d: StatusDefinition, audit?: OperatorAuditRecord) {
    const row = await transaction(this.sql, async (tx) => {
      const [inserted] = await tx<StatusRow[]>`
        INSERT INTO status_definition (application_id, task_type, version, statuses, created_at)
        VALUES (${d.applicationId}, ${d.taskType}, ${d.version}, ${tx.json(d.statuses as never)}, ${d.createdAt})
        ON CONFLICT DO NOTHING RETURNING *`;
      // Only a new version is audited (the same one again changes nothing).
      if (inserted && audit) await insertAudit(tx, audit);
      return inserted;
    });
    if (row) return { inserted: true, stored: toStatus(row) };
    const stored = await this.getStatusDefinition(d.applicationId, d.taskType, d.version);
    return { inserted: false, stored: stored! };
  }

  async getStatusDefinition(applicationId: string, taskType: string, version: number) {
    const [row] = await this.sql<StatusRow[]>`
      SELECT * FROM status_definition WHERE application_id = ${applicationId} AND task_type = ${taskType} AND version = ${version}`;
    return row ? toStatus(row) : null;
  }

  async listStatusDefinitions(applicationId: string) {
    const rows = await this.sql<StatusRow[]>`
      SELECT * FROM status_definition WHERE application_id = ${applicationId} ORDER BY task_type, version`;
    return rows.map(toStatus);
  }

  async insertOperationDefinition(d: OperationDefinition, audit?: OperatorAuditRecord) {
    const row = await transaction(this.sql, async (tx) => {
      const [inserted] = await tx<OperationRow[]>`
        INSERT INTO operation_definition (application_id, operation_code, version, display_name, task_type_pattern,
                                          producer_pattern, allowed_event_types, data_schemas, failure_policy, created_at)
        VALUES (${d.applicationId}, ${d.operationCode}, ${d.version}, ${d.displayName}, ${d.taskTypePattern}, ${d.producerPattern},
                ${d.allowedEventTypes}::text[], ${tx.json(d.dataSchemas as never)}, ${d.failurePolicy}, ${d.createdAt})
        ON CONFLICT DO NOTHING RETURNING *`;
      if (inserted && audit) await insertAudit(tx, audit);
      return inserted;
    });
    if (row) return { inserted: true, stored: toOperation(row) };
    const stored = await this.getOperationDefinition(d.applicationId, d.operationCode, d.version);
    return { inserted: false, stored: stored! };
  }

  async getOperationDefinition(applicationId: string, operationCode: string, version?: number) {
    const [row] = await this.sql<OperationRow[]>`
      SELECT * FROM operation_definition
      WHERE application_id = ${applicationId} AND operation_code = ${operationCode} AND enabled
        ${version !== undefined ? this.sql`AND version = ${version}` : this.sql``}
      ORDER BY version DESC LIMIT 1`;
    return row ? toOperation(row) : null;
  }

  async listOperationDefinitions(applicationId: string) {
    const rows = await this.sql<OperationRow[]>`
      SELECT * FROM operation_definition WHERE application_id = ${applicationId} ORDER BY operation_code, version`;
    return rows.map(toOperation);
  }
}
