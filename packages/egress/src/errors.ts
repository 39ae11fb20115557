/**
 * How a request made on a tenant's behalf fails. The messages are fixed: they never carry the address,
 * the port, an errno or the peer's bytes, so what a tenant reads cannot tell a refused address from a
 * closed port or a port that speaks something else than HTTP. The cause stays on `cause` for the logs.
 */
export type EgressFailure =
  /** The policy refuses the address (or every address the name resolved to); nothing was sent. Final. */
  | 'EGRESS_REFUSED'
  /** No HTTP answer: the name does not resolve, nothing accepts, the peer reset, spoke no HTTP or timed out. */
  | 'EGRESS_UNREACHABLE'
  /** The answer's body is larger than the caller's cap; reading stopped there. */
  | 'EGRESS_TOO_LARGE'
  /** More redirects than the caller follows, or one to a URL that is not http(s). */
  | 'EGRESS_REDIRECT_REFUSED';

const messages: Record<EgressFailure, string> = {
  EGRESS_REFUSED: 'the URL’s address is not one TDP may reach (egress policy)',
  EGRESS_UNREACHABLE: 'no HTTP answer from the URL',
  EGRESS_TOO_LARGE: 'the answer is larger than allowed',
  EGRESS_REDIRECT_REFUSED: 'the URL redirects where TDP does not follow',
};

export class EgressError extends Error {
  override name = 'EgressError';
  constructor(
    readonly code: EgressFailure,
    options?: { cause?: unknown },
  ) {
    super(messages[code], options);
  }

  /** Worth trying again later: only a place that did not answer may answer next time. */
  get retryable(): boolean {
    return this.code === 'EGRESS_UNREACHABLE';
  }
}

/** The `EgressError` an error is or wraps (a refusal from the connector arrives as the request's error). */
export function egressErrorOf(error: unknown): EgressError | null {
  for (let e = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth += 1)
    if (e instanceof EgressError) return e;
  return null;
}
