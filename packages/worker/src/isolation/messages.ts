/**
 * What the worker and a capability runner (a child process, runner.ts) say to each other over IPC. The
 * runner holds no credential and no local database: it runs the capability's code and asks the worker
 * for everything else (grants and transfers, progress, checkpoints, logs), so a runner that dies takes
 * nothing with it but its attempt.
 */
import type { OutputSpec, ProgressUpdate } from '../sdk.ts';

/** Worker → runner. */
export type ToRunner =
  | {
      type: 'run';
      attemptId: string;
      /** `name@version` of a capability the runner's module exports. */
      capability: string;
      input: unknown;
      meta: { taskId: string; stepKey: string; attempt: number; workDirectory: string };
      checkpoint: unknown;
    }
  | { type: 'abort'; attemptId: string; reason: string }
  | { type: 'reply'; callId: number; result?: unknown; error?: SerializedError };

/** What a capability may ask of the worker, and what each answers. */
export interface RunnerCalls {
  download: { args: [resourceRef: string]; result: string };
  allocateOutput: {
    args: [spec: OutputSpec];
    result: { outputId: number; path: string; resourceRef: string };
  };
  upload: { args: [outputId: number]; result: { resourceRef: string; bytes: number } };
}

/** Runner → worker. Every message of an attempt names it: a late one from an attempt that ended is ignored. */
export type FromRunner =
  | { type: 'ready' }
  | { type: 'progress'; attemptId: string; percent: number; update?: ProgressUpdate }
  | { type: 'checkpoint'; attemptId: string; data: unknown }
  | { type: 'log'; attemptId: string; level: 'info' | 'warn' | 'error'; message: string; fields?: object }
  | {
      type: 'call';
      attemptId: string;
      callId: number;
      method: keyof RunnerCalls;
      args: unknown[];
    }
  | { type: 'result'; attemptId: string; output: unknown }
  | { type: 'failed'; attemptId: string; error: SerializedError };

/** An error across the process boundary: a CapabilityError keeps its code and options. */
export interface SerializedError {
  name: string;
  message: string;
  code?: string;
  options?: { retryable?: boolean; category?: string; detail?: string; details?: Record<string, unknown> };
}
