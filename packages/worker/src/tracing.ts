/**
 * The worker's spans (docs/observability.md) on the OpenTelemetry API. They are on only when tracing is
 * configured (`startWorker`'s `tracing`; `tdp worker` sets it when OTEL_EXPORTER_OTLP_ENDPOINT is set):
 * only then are `@opentelemetry/api` and `@opentelemetry/core` imported, optional peer dependencies a
 * worker without tracing does not install. Off, no span is made and a stored W3C `traceparent` is sent on
 * unchanged. On, each span continues it: the run of an attempt its START_ATTEMPT's, a report its attempt
 * run's; they record once the program registered an SDK (`tdp worker` does).
 */
import { importOptional } from './optionalPackages.ts';

export interface WorkerSpans {
  /** Runs `work` in a span continuing `parent` (none: no span at all, the trace was not started). */
  run<T>(
    name: string,
    parent: string | null | undefined,
    attributes: Record<string, string | number>,
    work: (traceparent: string | undefined) => Promise<T>,
  ): Promise<T>;
}

/** Tracing off: the work goes on the parent's context unchanged. */
export const noSpans: WorkerSpans = { run: (_name, parent, _attributes, work) => work(parent || undefined) };

/** Tracing on; fails naming the packages to install when they are not. */
export async function openTelemetrySpans(setting: string): Promise<WorkerSpans> {
  const [api, { W3CTraceContextPropagator }] = await importOptional(
    () => Promise.all([import('@opentelemetry/api'), import('@opentelemetry/core')]),
    ['@opentelemetry/api', '@opentelemetry/core'],
    setting,
  );
  const {
    context,
    defaultTextMapGetter,
    defaultTextMapSetter,
    ROOT_CONTEXT,
    SpanKind,
    SpanStatusCode,
    trace,
  } = api;
  const propagator = new W3CTraceContextPropagator();
  return {
    run(name, parent, attributes, work) {
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
    },
  };
}

/** Whether the environment asks for traces (the exporter reads the rest of OTEL_EXPORTER_OTLP_* itself). */
export function otlpTracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}
