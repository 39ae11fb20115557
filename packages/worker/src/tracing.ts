/**
 * The worker's spans (docs/observability.md) on the OpenTelemetry API: they record only when the program
 * registered an SDK (`tdp worker` does when OTEL_EXPORTER_OTLP_ENDPOINT is set); otherwise the API is a
 * no-op and no trace context is kept or sent. Each span continues a stored W3C `traceparent`: the run
 * of an attempt its START_ATTEMPT's, a report its attempt run's.
 */
import {
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

const propagator = new W3CTraceContextPropagator();

/** Runs `work` in a span continuing `parent` (none: no span at all, the trace was not started). */
export function inWorkerSpan<T>(
  name: string,
  parent: string | null | undefined,
  attributes: Record<string, string | number>,
  work: (traceparent: string | undefined) => Promise<T>,
): Promise<T> {
  if (!parent) return work(undefined);
  const parentContext = propagator.extract(ROOT_CONTEXT, { traceparent: parent }, defaultTextMapGetter);
  const kind = name === 'tdp.worker.report' ? SpanKind.CLIENT : SpanKind.CONSUMER;
  return trace
    .getTracer('tdp-worker')
    .startActiveSpan(name, { kind, attributes }, parentContext, async (span) => {
      const carrier: Record<string, string> = {};
      propagator.inject(context.active(), carrier, defaultTextMapSetter);
      try {
        // With no SDK the span is not recording: send on the parent's context unchanged.
        return await work(span.isRecording() ? carrier.traceparent : parent);
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.name ?? 'error' });
        throw error;
      } finally {
        span.end();
      }
    });
}
