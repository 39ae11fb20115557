/**
 * The process-level net under `tdp server` and `tdp gateway`: an unhandled rejection or uncaught
 * exception is logged with what it was (name, code, message, stack — never query parameters or other
 * values) and marks the process not ready for a while (`ServerHealth.processFault`). A rejection never
 * ends the process, nor does an exception raised by the database driver for a lost connection (the
 * connection is gone; the pool opens another). Any other uncaught exception exits with 1 after it is
 * logged: the process state is unknown, and its supervisor starts a clean one.
 *
 * A net, not the fix: each fault it catches is a bug to fix where it arises (see the database adapter).
 */
import { type Logger, pino } from 'pino';
import { isDatabaseUnavailable } from '../adapters/outbound/postgres/database.ts';

export type ProcessFaultKind = 'unhandled rejection' | 'uncaught exception';

/** The fields of an error that are safe to log: no values of queries or requests. */
function describe(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { value: typeof error };
  const e = error as Error & { code?: unknown; severity?: unknown; routine?: unknown };
  return {
    name: e.name,
    message: e.message,
    ...(typeof e.code === 'string' ? { code: e.code } : {}),
    ...(typeof e.severity === 'string' ? { severity: e.severity } : {}),
    ...(typeof e.routine === 'string' ? { routine: e.routine } : {}),
    stack: e.stack,
  };
}

/** Installs the net; returns a function that removes it. */
export function guardProcess(options: {
  /** Where faults are logged (default: a pino logger on stdout, for `tdp gateway`). */
  logger?: Logger;
  /** Told of every fault the net caught (the server stops being ready for a while). */
  onFault?: (kind: ProcessFaultKind, error: unknown) => void;
  /** Ends the process (a test passes its own). */
  exit?: (code: number) => void;
}): () => void {
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const logger = options.logger ?? pino();
  const caught = (kind: ProcessFaultKind, error: unknown) => {
    const known = isDatabaseUnavailable(error);
    const fatal = kind === 'uncaught exception' && !known;
    logger[fatal ? 'fatal' : 'error'](
      { fault: kind, knownDatabaseFault: known, err: describe(error) },
      fatal
        ? `${kind}: exiting, the process state is unknown`
        : `${kind} caught by the process guard; not ready for a while`,
    );
    options.onFault?.(kind, error);
    if (fatal) exit(1);
  };
  const onRejection = (reason: unknown) => caught('unhandled rejection', reason);
  const onException = (error: Error) => caught('uncaught exception', error);
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return () => {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
  };
}
