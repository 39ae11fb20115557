/** A refusal as a gRPC status: the code its HTTP status maps to, and the Problem in the rich details. */
import { status as GrpcStatus, Metadata, type ServiceError } from '@grpc/grpc-js';
import type { ErrorCode } from '@tdp/protocol';
import { grpcStatusDetailsKey } from '@tdp/protocol';
import { AppError } from '../../../core/shared/errors.ts';
import { translateDatabaseError } from '../../outbound/postgres/database.ts';
import { problemMessage } from './wire.ts';

type Serialize = (value: object) => Buffer;

const byHttpStatus: Record<number, GrpcStatus> = {
  400: GrpcStatus.INVALID_ARGUMENT,
  401: GrpcStatus.UNAUTHENTICATED,
  403: GrpcStatus.PERMISSION_DENIED,
  404: GrpcStatus.NOT_FOUND,
  409: GrpcStatus.FAILED_PRECONDITION,
  410: GrpcStatus.NOT_FOUND,
  413: GrpcStatus.INVALID_ARGUMENT,
  415: GrpcStatus.INVALID_ARGUMENT,
  422: GrpcStatus.INVALID_ARGUMENT,
  428: GrpcStatus.FAILED_PRECONDITION,
  429: GrpcStatus.RESOURCE_EXHAUSTED,
  431: GrpcStatus.INVALID_ARGUMENT,
  500: GrpcStatus.INTERNAL,
  503: GrpcStatus.UNAVAILABLE,
};

export function grpcCodeOf(httpStatus: number): GrpcStatus {
  return byHttpStatus[httpStatus] ?? GrpcStatus.UNKNOWN;
}

/** Anything a handler threw, as the problem REST would answer (unexpected errors: INTERNAL_ERROR). */
export function problemOfError(error: unknown): { code: ErrorCode; detail: string; unexpected: boolean } {
  const translated = translateDatabaseError(error);
  if (translated instanceof AppError)
    return { code: translated.code, detail: translated.message, unexpected: false };
  return {
    code: 'INTERNAL_ERROR',
    detail: 'an unexpected error occurred; it has been logged',
    unexpected: true,
  };
}

/** The ServiceError a unary call ends with; its details are google.rpc.Status carrying the Problem. */
export function serviceError(
  code: ErrorCode,
  detail: string,
  serializers: { problem: Serialize; status: Serialize },
): Partial<ServiceError> {
  const problem = problemMessage(code, detail);
  const grpcCode = grpcCodeOf(problem.status);
  const metadata = new Metadata();
  metadata.set('tdp-problem-code', code);
  metadata.set(
    grpcStatusDetailsKey,
    serializers.status({
      code: grpcCode,
      message: detail,
      details: [
        { typeUrl: 'type.googleapis.com/tdp.reporting.v1.Problem', value: serializers.problem(problem) },
      ],
    }),
  );
  return { code: grpcCode, details: `${code}: ${detail}`, metadata };
}
