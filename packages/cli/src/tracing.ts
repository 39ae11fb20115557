/**
 * OpenTelemetry for `tdp server` and `tdp worker`: on when OTEL_EXPORTER_OTLP_ENDPOINT is set (the
 * exporter reads OTEL_EXPORTER_OTLP_* itself, e.g. OTEL_EXPORTER_OTLP_PROTOCOL=http/json), off otherwise —
 * then nothing here is even imported, and the server and worker use their no-op tracing.
 */

export interface RunningTracing {
  /** Exports what is buffered and stops (before the process exits). */
  shutdown(): Promise<void>;
}

export async function startTracing(
  env: NodeJS.ProcessEnv,
  serviceName: string,
): Promise<RunningTracing | null> {
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim())
    return null;
  const [{ trace, context, propagation }, sdk, { OTLPTraceExporter }, resources, conventions, hooks, core] =
    await Promise.all([
      import('@opentelemetry/api'),
      import('@opentelemetry/sdk-trace'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/semantic-conventions'),
      import('@opentelemetry/context-async-hooks'),
      import('@opentelemetry/core'),
    ]);
  const provider = new sdk.TracerProvider({
    resource: resources.resourceFromAttributes({
      [conventions.ATTR_SERVICE_NAME]: env.OTEL_SERVICE_NAME?.trim() || serviceName,
    }),
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter: new OTLPTraceExporter() })],
  });
  context.setGlobalContextManager(new hooks.AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new core.W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  return { shutdown: () => provider.shutdown() };
}
