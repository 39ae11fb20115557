import type { FastifyRequest } from 'fastify';
import { noTracing, type Tracing } from '../../../core/shared/ports.ts';

/** A server span for a request, continuing the caller's W3C `traceparent` header when it sends one. */
export function inboundSpan<T>(
  tracing: Tracing | undefined,
  name: string,
  request: FastifyRequest,
  work: () => Promise<T>,
): Promise<T> {
  const header = request.headers.traceparent;
  return serverSpan(tracing, name, typeof header === 'string' ? header : null, work);
}

/** A server span continuing `parent` (a W3C `traceparent`, or null to start a trace); with tracing off, just the work. */
export function serverSpan<T>(
  tracing: Tracing | undefined,
  name: string,
  parent: string | null,
  work: () => Promise<T>,
): Promise<T> {
  if (!tracing || tracing === noTracing) return work();
  return tracing.inSpan(name, { kind: 'server', parent }, () => work());
}

/** The trace id of the active span (the `traceId` log field, docs/observability.md), or undefined. */
export function traceIdOf(tracing: Tracing | undefined): string | undefined {
  return tracing?.traceparent()?.split('-')[1];
}
