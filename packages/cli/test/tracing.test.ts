/**
 * `startTracing` loads the OpenTelemetry SDK only when an OTLP endpoint is configured: without one it
 * returns null and the API's global tracer stays the no-op one (no span is recorded by anybody).
 */
import { ProxyTracerProvider, trace } from '@opentelemetry/api';
import { afterAll, expect, it } from 'vitest';
import { startTracing } from '../src/tracing.ts';

const delegate = () => (trace.getTracerProvider() as ProxyTracerProvider).getDelegate();
afterAll(() => trace.disable());

it('is off without OTEL_EXPORTER_OTLP_ENDPOINT: no SDK, spans do not record', async () => {
  expect(await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: '' }, 'tdp-test')).toBeNull();
  expect(trace.getTracerProvider()).toBeInstanceOf(ProxyTracerProvider);
  expect(delegate().constructor.name).toBe('NoopTracerProvider');
  expect(trace.getTracer('t').startSpan('s').isRecording()).toBe(false);
});

it('is on with an endpoint: the SDK provider records spans', async () => {
  const running = await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }, 'tdp-test');
  expect(running).not.toBeNull();
  expect(delegate().constructor.name).not.toBe('NoopTracerProvider');
  const span = trace.getTracer('t').startSpan('s');
  expect(span.isRecording()).toBe(true);
  span.end();
  await running!.shutdown().catch(() => {});
});
