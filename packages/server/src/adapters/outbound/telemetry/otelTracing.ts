/**
 * The `Tracing` port on the OpenTelemetry API. It records only once an SDK registered a tracer provider
 * (`tdp server` does when OTEL_EXPORTER_OTLP_ENDPOINT is set, see packages/cli/src/tracing.ts); the
 * host uses it only then, so with tracing off not even the API is called.
 */
import {
  type Context,
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { SpanAttributes, SpanOptions, TraceSpan, Tracing } from '../../../core/shared/ports.ts';

const propagator = new W3CTraceContextPropagator();
const kinds = { internal: SpanKind.INTERNAL, server: SpanKind.SERVER, client: SpanKind.CLIENT } as const;

/** The context a stored `traceparent` names (the root context for a malformed or missing one). */
export function contextOf(traceparent: string | null): Context {
  if (!traceparent) return ROOT_CONTEXT;
  return propagator.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter);
}

/** The `traceparent` of the active span, or undefined. */
export function activeTraceparent(): string | undefined {
  const carrier: Record<string, string> = {};
  propagator.inject(context.active(), carrier, defaultTextMapSetter);
  return carrier.traceparent;
}

const defined = (attributes: SpanAttributes = {}) =>
  Object.fromEntries(Object.entries(attributes).filter(([, v]) => v !== undefined)) as Record<
    string,
    string | number | boolean
  >;

export class OpenTelemetryTracing implements Tracing {
  private readonly tracer = trace.getTracer('tdp-server');

  inSpan<T>(name: string, options: SpanOptions, work: (span: TraceSpan) => Promise<T>): Promise<T> {
    const parent = options.parent === undefined ? context.active() : contextOf(options.parent);
    return this.tracer.startActiveSpan(
      name,
      { kind: kinds[options.kind ?? 'internal'], attributes: defined(options.attributes) },
      parent,
      async (span) => {
        try {
          return await work({ setAttributes: (a) => span.setAttributes(defined(a)) });
        } catch (error) {
          span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.name ?? 'error' });
          throw error;
        } finally {
          span.end();
        }
      },
    );
  }

  traceparent(): string | undefined {
    return activeTraceparent();
  }

  recordSpan(name: string, options: SpanOptions & { startedAt: Date; endedAt: Date }): void {
    const parent = options.parent === undefined ? context.active() : contextOf(options.parent);
    this.tracer
      .startSpan(
        name,
        {
          kind: kinds[options.kind ?? 'internal'],
          attributes: defined(options.attributes),
          startTime: options.startedAt,
        },
        parent,
      )
      .end(options.endedAt);
  }
}
