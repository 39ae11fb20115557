/**
 * Where the gRPC reporting contract (`proto/tdp/reporting/v1/reporting.proto`) is, and how both sides
 * load it: with `@grpc/proto-loader`, these options give objects with the REST body's camelCase names,
 * absent `optional` fields left out (plain fields at their zero value, whether or not a client wrote
 * it), 64-bit integers as numbers and enums as their names.
 */
import { fileURLToPath } from 'node:url';

/** The `.proto` file, in this package (beside `src/` and `dist/`, so an installed package finds it too). */
export const reportingProtoPath = fileURLToPath(
  new URL('../proto/tdp/reporting/v1/reporting.proto', import.meta.url),
);

/** The fully qualified name of the service in the `.proto`. */
export const reportingServiceName = 'tdp.reporting.v1.Reporting';

/** `@grpc/proto-loader` options the server and the worker both load the file with. */
export const reportingProtoOptions = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
} as const;

/** The metadata key of a unary refusal's details (google.rpc.Status with a tdp Problem). */
export const grpcStatusDetailsKey = 'grpc-status-details-bin';

/**
 * An event's REST body (the JSON form) as the gRPC `Event` message: the same fields, `data.value` and a
 * worker's `output` as JSON text. Identity fields of a binding (`attemptId`, `leaseVersion`, the
 * credential) are left out; the server takes them from the binding.
 */
export function eventMessageOf(body: Record<string, unknown>): Record<string, unknown> {
  const {
    attemptId: _attemptId,
    leaseVersion: _leaseVersion,
    executionToken: _token,
    executionHandle: _handle,
    data,
    output,
    ...rest
  } = body;
  return {
    ...rest,
    ...(data !== undefined
      ? {
          data: {
            schema: (data as { schema: string }).schema,
            valueJson: JSON.stringify((data as { value: unknown }).value ?? null),
          },
        }
      : {}),
    ...(output !== undefined ? { outputJson: JSON.stringify(output) } : {}),
  };
}
