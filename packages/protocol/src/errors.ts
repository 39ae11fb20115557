/**
 * The error catalogue: every failure TDP reports over HTTP has a stable `code`, an HTTP status and a
 * title. Clients branch on `code`, never on message text. `retryable` says whether repeating the same
 * request (with the same idempotency key) can succeed later.
 *
 * docs/errors.md mirrors this table; a test keeps the two in step.
 */
export const errorCatalogue = {
  MALFORMED_JSON: { status: 400, retryable: false, title: 'The request body is not valid JSON' },
  // JSON that parses but TDP refuses (packages/protocol/src/jsonLimits.ts), on every route that takes JSON.
  JSON_TOO_DEEP: {
    status: 400,
    retryable: false,
    title: 'The JSON nests objects and arrays deeper than the limit (64 by default)',
  },
  JSON_UNPAIRED_SURROGATE: {
    status: 400,
    retryable: false,
    title: 'A string or key of the JSON holds an unpaired UTF-16 surrogate',
  },
  VALIDATION_FAILED: { status: 400, retryable: false, title: 'The request does not match its schema' },
  IDEMPOTENCY_KEY_REQUIRED: { status: 400, retryable: false, title: 'An Idempotency-Key header is required' },
  CRON_EXPRESSION_INVALID: { status: 400, retryable: false, title: 'The cron expression does not parse' },
  UNAUTHENTICATED: { status: 401, retryable: false, title: 'Missing or invalid credentials' },
  FORBIDDEN: { status: 403, retryable: false, title: 'The credentials do not allow this operation' },
  NOT_AN_APPROVER: { status: 403, retryable: false, title: 'You may not decide on this approval step' },
  CSRF_REJECTED: {
    status: 403,
    retryable: false,
    title: "A browser request from another site, or without the session's CSRF token",
  },
  // Operator single sign-on (docs/operators.md): the provider's answer, the provider itself, the roles.
  SSO_REJECTED: {
    status: 400,
    retryable: false,
    title: 'The single sign-on answer was refused (wrong state, nonce or issuer, or a refused code)',
  },
  SSO_NO_ROLE: { status: 403, retryable: false, title: "No role maps to the signed-in person's groups" },
  SSO_UNAVAILABLE: {
    status: 502,
    retryable: true,
    title: 'The single sign-on provider could not be reached or failed',
  },
  ROUTE_NOT_FOUND: { status: 404, retryable: false, title: 'No such endpoint' },
  TENANT_NOT_FOUND: { status: 404, retryable: false, title: 'Tenant not found' },
  OPERATOR_NOT_FOUND: { status: 404, retryable: false, title: 'Operator not found' },
  OPERATOR_TOKEN_NOT_FOUND: { status: 404, retryable: false, title: 'Operator token not found' },
  OPERATOR_EMAIL_TAKEN: {
    status: 409,
    retryable: false,
    title: 'Another operator account has this email',
  },
  APPLICATION_NOT_FOUND: { status: 404, retryable: false, title: 'Application not found' },
  API_KEY_NOT_FOUND: { status: 404, retryable: false, title: 'API key not found' },
  TASK_NOT_FOUND: { status: 404, retryable: false, title: 'Task not found' },
  WORKFLOW_DEFINITION_NOT_FOUND: {
    status: 404,
    retryable: false,
    title: 'Workflow definition not found',
  },
  WORKFLOW_NOT_FOUND: { status: 404, retryable: false, title: 'Workflow not found' },
  SCHEDULE_NOT_FOUND: { status: 404, retryable: false, title: 'Schedule not found' },
  WORKER_NOT_FOUND: { status: 404, retryable: false, title: 'No live worker session with this id' },
  CONCURRENCY_KEY_UNKNOWN: {
    status: 404,
    retryable: false,
    title: 'No workflow of this tenant declares this concurrency key',
  },
  NODE_NOT_FOUND: { status: 404, retryable: false, title: 'No node with this id' },
  JOB_NOT_FOUND: { status: 404, retryable: false, title: 'No bulk job with this id' },
  NOTIFICATION_NOT_FOUND: { status: 404, retryable: false, title: 'Notification not found' },
  STEP_NOT_REGISTERED: {
    status: 404,
    retryable: false,
    title: 'The step (or step attempt) is not registered for this task',
  },
  STATUS_DEFINITION_NOT_FOUND: { status: 404, retryable: false, title: 'Status definition not found' },
  METHOD_NOT_ALLOWED: { status: 405, retryable: false, title: 'Method not allowed' },
  EXECUTION_CREDENTIAL_INVALID: {
    status: 401,
    retryable: false,
    title: 'The execution token or handle is missing, invalid or expired',
  },
  EVENT_TYPE_NOT_ALLOWED: {
    status: 403,
    retryable: false,
    title: 'This credential may not report this event type',
  },
  OPERATION_MISMATCH: {
    status: 403,
    retryable: false,
    title: 'The operationCode does not match the registered execution',
  },
  PRODUCER_MISMATCH: {
    status: 403,
    retryable: false,
    title: 'The producerId does not match the registered execution',
  },
  OPERATION_NOT_ALLOWED: {
    status: 403,
    retryable: false,
    title: "The task's dynamic registration policy does not allow this operation here",
  },
  EVENTS_PRUNED: {
    status: 410,
    retryable: false,
    title: 'The requested part of the event history was pruned',
  },
  TASK_ARCHIVED: {
    status: 410,
    retryable: false,
    title: 'The task finished long ago and its history was archived',
  },
  EVENT_ID_CONFLICT: {
    status: 409,
    retryable: false,
    title: 'This eventId was already used with different content',
  },
  STALE_EXECUTION: {
    status: 409,
    retryable: false,
    title: 'The event belongs to an execution that is no longer current',
  },
  // gRPC reporting only (docs/grpc.md): the client binds the execution again and resends.
  STREAM_EXECUTION_KEY_UNKNOWN: {
    status: 409,
    retryable: false,
    title: 'The stream execution key is not bound on this stream; bind the execution again',
  },
  SOURCE_SEQ_REGRESSION: {
    status: 409,
    retryable: false,
    title: 'sourceSeq is not higher than the last accepted one of this producer',
  },
  TASK_TYPE_FROZEN: {
    status: 409,
    retryable: false,
    title: 'The task type and status definition are already bound',
  },
  REGISTRY_VERSION_EXISTS: {
    status: 409,
    retryable: false,
    title: 'This registry version is already defined with different content',
  },
  VERSION_MISMATCH: {
    status: 412,
    retryable: false,
    title: 'If-Match does not match the current task version',
  },
  ATTEMPT_NOT_FOUND: {
    status: 404,
    retryable: false,
    title: 'No attempt with this id is leased to a worker of this key',
  },
  GRANT_NOT_FOUND: {
    status: 404,
    retryable: false,
    title: 'No issued grant with this id belongs to this attempt',
  },
  FILE_NOT_FOUND: {
    status: 404,
    retryable: false,
    title: 'No such file among the development files (tdp dev)',
  },
  RESOURCE_PROVIDER_NOT_CONFIGURED: {
    status: 409,
    retryable: false,
    title: 'The application has no resource provider',
  },
  RESOURCE_PROVIDER_REFUSED: {
    status: 403,
    retryable: false,
    title: 'The resource provider refused the grant',
  },
  RESOURCE_PROVIDER_FAILED: {
    status: 502,
    retryable: true,
    title: 'The resource provider could not be reached or failed',
  },
  RESOURCE_PROVIDER_INVALID: {
    status: 502,
    retryable: false,
    title: "The resource provider's answer is not a usable grant",
  },
  WATCH_SESSION_NOT_FOUND: {
    status: 404,
    retryable: false,
    title: 'No task stream with this session id is open here for you',
  },
  DETAIL_SUBSCRIPTION_LIMIT: {
    status: 409,
    retryable: false,
    title: 'This connection already follows 20 task details; stop following one first',
  },
  SINGLETON_RUNNING: {
    status: 409,
    retryable: true,
    title: 'A task with this singleton key is not finished yet',
  },
  IDEMPOTENCY_KEY_REUSED: {
    status: 409,
    retryable: false,
    title: 'The Idempotency-Key was already used for a different request',
  },
  WORKFLOW_VERSION_EXISTS: {
    status: 409,
    retryable: false,
    title: 'This workflow version is already published with different content',
  },
  APPLICATION_NAME_TAKEN: {
    status: 409,
    retryable: false,
    title: 'An application with this name already exists in the tenant',
  },
  TENANT_NAME_TAKEN: { status: 409, retryable: false, title: 'A tenant with this name already exists' },
  INVALID_TRANSITION: { status: 409, retryable: false, title: 'The execution cannot make this transition' },
  RERUN_OUTPUT_MISSING: {
    status: 409,
    retryable: false,
    title: 'A step before the rerun step has no output to reuse (it did not succeed)',
  },
  STEP_NOT_WAITING: {
    status: 409,
    retryable: false,
    title: 'The step is not waiting for this (not reached yet, already decided, or of another kind)',
  },
  DECISION_CONFLICT: {
    status: 409,
    retryable: false,
    title: 'You already decided differently on this approval step',
  },
  APPROVAL_TIMED_OUT: {
    status: 409,
    retryable: false,
    title: "The approval step's time to decide has run out",
  },
  CORRECTION_FORBIDDEN: {
    status: 409,
    retryable: false,
    title: 'The state machine forbids this correction; send force: true to make it anyway (audited)',
  },
  PAYLOAD_TOO_LARGE: { status: 413, retryable: false, title: 'The request body is too large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, retryable: false, title: 'Unsupported content type' },
  HEADERS_TOO_LARGE: { status: 431, retryable: false, title: 'The request headers are too large' },
  SCHEMA_NOT_ALLOWED: {
    status: 422,
    retryable: false,
    title: 'data.schema is not registered for this operation and event type',
  },
  DATA_INVALID: { status: 422, retryable: false, title: 'data.value does not match its registered schema' },
  DECISION_DATA_INVALID: {
    status: 422,
    retryable: false,
    title: "The decision's data does not match the approval step's form schema",
  },
  SIGNAL_UNKNOWN: {
    status: 422,
    retryable: false,
    title: "The task's workflow has no signal step waiting for a signal of this name",
  },
  SIGNAL_PAYLOAD_INVALID: {
    status: 422,
    retryable: false,
    title: "The signal's payload does not match its schema",
  },
  UNKNOWN_BUSINESS_STATUS: {
    status: 422,
    retryable: false,
    title: "businessStatus is not registered in the task's status definition",
  },
  DYNAMIC_STEP_LIMIT: {
    status: 422,
    retryable: false,
    title: "A limit of the task's dynamic registration policy was reached",
  },
  BULK_FILTER_TOO_BROAD: {
    status: 422,
    retryable: false,
    title: 'The filter matches more tasks than one bulk job may take; narrow it',
  },
  PRECONDITION_REQUIRED: {
    status: 428,
    retryable: false,
    title: 'An If-Match header with the task version is required',
  },
  REGISTRATION_RATE_LIMITED: {
    status: 429,
    retryable: true,
    title: 'Too many dynamic step registrations for this task in the last minute',
  },
  RATE_LIMITED: {
    status: 429,
    retryable: true,
    title: 'Too many requests for this credential; retry after Retry-After seconds',
  },
  AUTH_THROTTLED: {
    status: 429,
    retryable: true,
    title: 'Too many failed authentications from this address; retry after Retry-After seconds',
  },
  CONNECTION_LIMIT: {
    status: 429,
    retryable: true,
    title: 'This address holds too many open connections; close one and retry',
  },
  TASKS_IN_FLIGHT_LIMIT: {
    status: 429,
    retryable: true,
    title: 'The application has as many unfinished tasks as it may; retry after Retry-After seconds',
  },
  MAP_ITEMS_LIMIT: {
    status: 422,
    retryable: false,
    title: 'A map step has more items than one step or one task may run',
  },
  SCHEDULE_LIMIT: { status: 422, retryable: false, title: 'The application has as many schedules as it may' },
  SCHEDULE_TOO_FREQUENT: {
    status: 422,
    retryable: false,
    title: 'The schedule would fire more often than the minimum interval allows',
  },
  WORKFLOW_DEFINITION_INVALID: { status: 422, retryable: false, title: 'The workflow definition is invalid' },
  // A required mapping reads a value a task passing the inputSchema may not have (docs/step-kinds.md).
  INPUT_MAPPING_NOT_GUARANTEED: {
    status: 422,
    retryable: false,
    title: 'A required input mapping reads a value the input schema does not guarantee',
  },
  UNKNOWN_WORKFLOW: {
    status: 422,
    retryable: false,
    title: 'No published workflow has this name and version',
  },
  RERUN_STEP_UNKNOWN: {
    status: 422,
    retryable: false,
    title: "fromStep names no step of the task's workflow",
  },
  INPUT_INVALID: {
    status: 422,
    retryable: false,
    title: "The input does not match the workflow's input schema",
  },
  CALLBACK_URL_INVALID: { status: 422, retryable: false, title: 'The callback URL is not acceptable' },
  // A URL TDP would call on a tenant's behalf names an address the egress policy refuses (docs/security.md).
  EGRESS_REFUSED: {
    status: 422,
    retryable: false,
    title: 'The URL names an address TDP does not connect to (egress policy)',
  },
  STEP_CONSTRAINTS_INVALID: { status: 422, retryable: false, title: 'The step constraints are invalid' },
  INTERNAL_ERROR: { status: 500, retryable: true, title: 'Internal error' },
  DATABASE_UNAVAILABLE: { status: 503, retryable: true, title: 'The database is unavailable' },
  REQUEST_TIMEOUT: { status: 503, retryable: true, title: 'The request did not finish within its deadline' },
  SHUTTING_DOWN: { status: 503, retryable: true, title: 'The server is shutting down' },
  NOT_READY: { status: 503, retryable: true, title: 'The server is not ready to take work' },
} as const satisfies Record<string, { status: number; retryable: boolean; title: string }>;

export type ErrorCode = keyof typeof errorCatalogue;

export interface FieldError {
  /** JSON pointer or dotted path of the offending value. */
  path: string;
  message: string;
}

/** RFC 9457 problem details, as TDP sends them (`application/problem+json`). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  code: ErrorCode;
  detail: string;
  retryable: boolean;
  errors?: FieldError[];
  instance?: string;
}

export function problemType(code: ErrorCode): string {
  return `urn:tdp:error:${code}`;
}
