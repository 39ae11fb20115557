/**
 * gRPC messages ↔ the REST bodies: a decoded message becomes the very object the REST route would have
 * parsed from JSON (same names, absent fields absent), checked with the same TypeBox schema and an Ajv
 * set up like Fastify's body validator, so that both adapters refuse the same input with the same code.
 */
import {
  CompactTaskEvent,
  type ErrorCode,
  type EventResult,
  errorCatalogue,
  FullTaskEvent,
  HeartbeatItem,
  type HeartbeatResult,
  jsonShapeFault,
  problemType,
  TaskEventRequest,
  WorkerEvent,
} from '@tdp/protocol';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { Type } from 'typebox';
import { AppError } from '../../../core/shared/errors.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
// The options of the HTTP app's body validator (http/app.ts).
const ajv = addFormats(
  new Ajv({ allErrors: true, removeAdditional: false, coerceTypes: false, useDefaults: true, strict: false }),
);

/** The gRPC `Event` message as proto-loader decodes it (see `reportingProtoOptions`). */
export interface EventMessage {
  eventId: string;
  eventType: string;
  sourceSeq: number;
  businessStatus?: string;
  phaseCode?: string;
  phaseLabel?: string;
  progress?: Record<string, unknown>;
  message?: string;
  occurredAt?: string;
  durationMs?: number;
  durationSource?: string;
  data?: { schema: string; valueJson: string };
  error?: Record<string, unknown>;
  failedStepId?: string;
  workflowId?: string;
  taskId?: string;
  taskType?: string;
  taskAttempt?: number;
  stepId?: string;
  operationCode?: string;
  stepAttempt?: number;
  executionId?: string;
  producerId?: string;
  outputJson?: string;
}

const copied = [
  'businessStatus',
  'phaseCode',
  'phaseLabel',
  'message',
  'occurredAt',
  'durationMs',
  'durationSource',
  'failedStepId',
  'workflowId',
  'taskId',
  'taskType',
  'taskAttempt',
  'stepId',
  'operationCode',
  'stepAttempt',
  'executionId',
  'producerId',
] as const;

/**
 * The REST body of an event message (what `JSON.parse` of the same event would give), within the JSON
 * limits REST's body parser holds it to (its JSON fields and its strings; jsonLimits.ts).
 */
export function eventBody(message: EventMessage | undefined, jsonMaxDepth: number): Record<string, unknown> {
  if (!message) throw new AppError('VALIDATION_FAILED', "/ must have required property 'event'");
  const body: Record<string, unknown> = {
    eventId: message.eventId,
    eventType: message.eventType,
    sourceSeq: message.sourceSeq,
  };
  for (const key of copied) if (message[key] !== undefined) body[key] = message[key];
  if (message.progress) body.progress = withoutSyntheticOneofs(message.progress);
  if (message.error) body.error = withoutSyntheticOneofs(message.error);
  if (message.data) body.data = { schema: message.data.schema, value: json(message.data.valueJson, '/data') };
  if (message.outputJson !== undefined) body.output = json(message.outputJson, '/output');
  const fault = jsonShapeFault(body, jsonMaxDepth);
  if (fault) throw new AppError(fault.code, `the event: ${fault.detail}`);
  return body;
}

// proto-loader names the field set in a proto3 `optional`'s synthetic oneof (`_unit: "unit"`).
function withoutSyntheticOneofs(value: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([key]) => !key.startsWith('_')));
}

function json(text: string, path: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new AppError('MALFORMED_JSON', `${path} is not valid JSON`);
  }
}

function compiled(schema: object): (body: unknown) => void {
  let validate: ValidateFunction | null = null;
  return (body) => {
    validate ??= ajv.compile(schema);
    if (validate(body)) return;
    const errors = (validate.errors ?? []).map((issue) => {
      const extra = issue.params?.additionalProperty;
      return {
        path: issue.instancePath || '/',
        message: extra ? `unknown field "${String(extra)}"` : (issue.message ?? 'is invalid'),
      };
    });
    throw new AppError('VALIDATION_FAILED', errors.map((e) => `${e.path} ${e.message}`).join('; '), errors);
  };
}

/** `POST /v1/task-events`'s body. */
export const checkSingleEvent = compiled(TaskEventRequest);
/** A stream event of an execution bound by token or handle: the batch item, identity from the binding. */
export const checkBoundEvent = compiled(
  Type.Union([
    CompactTaskEvent,
    Type.Object(
      {
        ...FullTaskEvent.properties,
        taskId: Type.Optional(FullTaskEvent.properties.taskId),
        producerId: Type.Optional(FullTaskEvent.properties.producerId),
        executionToken: Type.String({ minLength: 10, maxLength: 4096 }),
      },
      { additionalProperties: false },
    ),
  ]),
);
/** A stream event of a bound worker attempt: an item of `events:batch`. */
export const checkWorkerEvent = compiled(WorkerEvent);
export const checkHeartbeat = compiled(HeartbeatItem);

/** The `Problem` message (REST's problem+json fields). */
export function problemMessage(code: ErrorCode, detail: string, status?: number) {
  const entry = errorCatalogue[code];
  return {
    code,
    status: status ?? entry.status,
    title: entry.title,
    detail,
    retryable: entry.retryable,
    type: problemType(code),
  };
}

/** An EventResult as its message: nulls (absent in protobuf) left out. */
export function eventResultMessage(result: EventResult): Record<string, unknown> {
  // The protobuf messages keep their own field names (`step_id`, `execution_id`); the JSON-only
  // canonical names are left out.
  const { stepKey: _stepKey, ...rest } = result;
  return Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== null));
}

export function heartbeatResultMessage(result: HeartbeatResult): Record<string, unknown> {
  const { index: _index, attemptId: _attemptId, ...rest } = result;
  return Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== null));
}
