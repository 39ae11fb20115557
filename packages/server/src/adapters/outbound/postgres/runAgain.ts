/**
 * When a fact transaction that failed runs again, whole, from its first read. A deadlock or a
 * serialization failure rolled it back: it runs again (up to five attempts in all). A connection lost
 * before anything was sent for its commit left nothing committed either (PostgreSQL rolls back a
 * transaction whose session ends), so it runs again once, on another connection: a backend killed or a
 * socket reset then costs the caller a few milliseconds instead of a 503 and its retry. Once the commit
 * was sent, a lost connection leaves the outcome unknown, and the error goes to the caller, whose
 * idempotency key makes its own retry safe.
 */

/** SQLSTATEs after which PostgreSQL rolled the whole transaction back and running it again may succeed. */
const rolledBackCodes = new Set(['40P01', '40001']);

/**
 * The driver's and the socket's errors for a connection that is gone, and PostgreSQL's for a backend that
 * was terminated (`pg_terminate_backend`): the server itself may well be up. Not "cannot connect now",
 * "too many connections" or a crash: running again at once would only meet them again.
 */
const connectionLostCodes = new Set(['CONNECTION_CLOSED', 'ECONNRESET', 'EPIPE', '57P01']);

const maxAttempts = 5;

export type RunAgain = 'no' | 'yes' | 'on another connection';

export function runAgain(
  error: unknown,
  state: { attempt: number; connectionsLost: number; committing: boolean },
): RunAgain {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || state.attempt >= maxAttempts) return 'no';
  if (rolledBackCodes.has(code)) return 'yes';
  if (connectionLostCodes.has(code) && !state.committing && state.connectionsLost === 0)
    return 'on another connection';
  return 'no';
}
