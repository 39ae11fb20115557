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
