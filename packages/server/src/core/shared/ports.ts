/** Time comes from here so tests can move it; SQL receives "now" as a parameter instead of calling now(). */
export interface Clock {
  now(): Date;
  /**
   * A clock that can jump (a test's) calls `listener` after each jump, so that loops sleeping until a
   * due time re-plan their sleep. The system clock never jumps.
   */
  onJump?(listener: () => void): void;
}

export interface IdGenerator {
  newId(): string;
}

export const systemClock: Clock = { now: () => new Date() };

/** Attributes of a span: the log lines' correlation fields (docs/observability.md) where known. */
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

export interface TraceSpan {
  setAttributes(attributes: SpanAttributes): void;
}

export interface SpanOptions {
  /**
   * A stored W3C `traceparent` to continue (a row written by another request or replica). Undefined: the
   * active span's child (or a new trace); null: a new trace whatever is active.
   */
  parent?: string | null;
  kind?: 'internal' | 'server' | 'client';
  attributes?: SpanAttributes;
}

/**
 * Traces (docs/observability.md) behind a port, so the core never imports OpenTelemetry. With tracing off
 * the host gives `noTracing`: no span, no traceparent, nothing stored.
 */
export interface Tracing {
  /** Runs `work` in a span that ends when it settles (a throw marks the span as an error). */
  inSpan<T>(name: string, options: SpanOptions, work: (span: TraceSpan) => Promise<T>): Promise<T>;
  /** The active span's `traceparent` (to store or send on), or undefined. */
  traceparent(): string | undefined;
  /** A span that already happened (one publication of a batch, each row in its own trace). */
  recordSpan(name: string, options: SpanOptions & { startedAt: Date; endedAt: Date }): void;
}

/** The stored trace context of tasks' runs (the create's, kept in the execution snapshot). */
export interface TraceContexts {
  /** Task id → the `traceparent` of its latest execution (tasks without one are left out). */
  ofTasks(taskIds: string[]): Promise<Map<string, string>>;
  /** Execution id → its `traceparent`. */
  ofExecutions(executionIds: string[]): Promise<Map<string, string>>;
}

const noSpan: TraceSpan = { setAttributes: () => {} };

export const noTracing: Tracing = {
  inSpan: (_name, _options, work) => work(noSpan),
  traceparent: () => undefined,
  recordSpan: () => {},
};
