import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { GrantRenewalPolicy } from '@tdp/protocol';
import type { WorkerClient } from './client.ts';
import type { CapabilityRunners } from './isolation/runnerPool.ts';
import type { LocalStore } from './localStore.ts';
import type { ReportingTransport } from './reporting.ts';
import type { Capability } from './sdk.ts';
import type { WorkerSpans } from './tracing.ts';

export interface Logger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
  /** Expected noise (a report refused because its attempt is already over); the JSON logger drops it. */
  debug?(fields: Record<string, unknown>, message: string): void;
}

export const silentLogger: Logger = { info: () => {}, warn: () => {}, error: () => {} };

/** One JSON line per message on stderr; never the worker key. */
export const jsonLogger: Logger = {
  info: (fields, message) => log('info', fields, message),
  warn: (fields, message) => log('warn', fields, message),
  error: (fields, message) => log('error', fields, message),
};

function log(level: string, fields: Record<string, unknown>, message: string): void {
  const err =
    fields.err instanceof Error ? { err: { message: fields.err.message, stack: fields.err.stack } } : {};
  process.stderr.write(
    `${JSON.stringify({ level, time: new Date().toISOString(), msg: message, ...fields, ...err })}\n`,
  );
}

export interface WorkerOptions {
  client: WorkerClient;
  /**
   * How events and attempt heartbeats are reported: the REST client by default, or `GrpcReporting`
   * (`transport: 'grpc'` of `startWorker`; docs/grpc.md).
   */
  reporting?: ReportingTransport;
  /** The spans of attempts and reports (tracing.ts; default none). */
  spans?: WorkerSpans;
  store: LocalStore;
  capabilities: Capability[];
  /** Where attempts run: capability runner processes (isolation), or in this process by default. */
  runners?: CapabilityRunners;
  name?: string;
  nodeId?: string;
  labels?: Record<string, string>;
  maxConcurrency?: number;
  /** How long SIGTERM waits for running attempts before handing them back. */
  drainGraceMs?: number;
  logger?: Logger;
  /** Progress reports per attempt are at most this frequent (unless the phase changes). */
  progressIntervalMs?: number;
  /** Where attempts keep their files (one folder each, removed when the attempt ends). */
  workDirectory?: string;
  /** While TDP refuses the worker key, it is tried again this often (default 5 s; keyRefusal.ts). */
  keyRetryMs?: number;
  /** How long a grant request keeps trying while TDP is unreachable (a restart) before the step fails. */
  grantRetryMs?: number;
  /** What the server acknowledged stays in the local SQLite this long, then is pruned (default 24 h). */
  localRetentionMs?: number;
  /**
   * A grant still needed (an output not yet uploaded, a download under way) is renewed once less than
   * this is left of it: `remainingFraction` of its lifetime or `remainingMs` (default 25% or 60 s).
   */
  grantRenewal?: GrantRenewalPolicy;
  /** How many times a download broken off midway resumes (a Range request, on a renewed URL if due). */
  downloadResumes?: number;
  /**
   * What downloads and uploads may reach beyond public addresses (`@tdp/egress`: CIDRs and `host:port`
   * pairs, `TDP_EGRESS_ALLOW`); the TDP servers of `client` are always allowed. Default: none.
   */
  egressAllow?: readonly string[];
  /** A download larger than this fails with `DOWNLOAD_TOO_LARGE` (default 1 GiB). */
  maxDownloadBytes?: number;
}

/** The folder of all attempts' work directories. */
export const workRootOf = (options: Pick<WorkerOptions, 'workDirectory'>) =>
  options.workDirectory ?? join(tmpdir(), 'tdp-worker');

export const defaultGrantRenewal: GrantRenewalPolicy = { remainingFraction: 0.25, remainingMs: 60_000 };
