import type { ErrorCode, FieldError } from '@tdp/protocol';

/** A failure the caller can act on: it maps to one catalogue entry and becomes a problem+json reply. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly fieldErrors: FieldError[] | undefined;

  constructor(code: ErrorCode, detail: string, fieldErrors?: FieldError[]) {
    super(detail);
    this.name = 'AppError';
    this.code = code;
    this.fieldErrors = fieldErrors;
  }
}

/**
 * 410 for a task whose history the retention sweep archived (docs/retention.md). It names the archive
 * day and batch an operator restores from, never a path on the server.
 */
export function archivedTaskError(tombstone: {
  taskId: string;
  archiveDay: string;
  batchId: string;
}): AppError {
  return new AppError(
    'TASK_ARCHIVED',
    `task ${tombstone.taskId} was archived on ${tombstone.archiveDay} (batch ${tombstone.batchId}); ` +
      `an operator can bring it back with: tdp archive restore --task ${tombstone.taskId}`,
  );
}

/**
 * A refusal for now (a quota, a throttle: 429): the caller may try again after `retryAfterSeconds`,
 * which the HTTP adapters send as `Retry-After`.
 */
export class RetryLaterError extends AppError {
  constructor(
    code: ErrorCode,
    detail: string,
    readonly retryAfterSeconds: number,
  ) {
    super(code, detail);
  }
}
