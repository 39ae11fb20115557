import { AppError } from '../shared/errors.ts';

/** Checks an outbound URL we will call with credentials: https (unless allowed), no userinfo. */
export function checkOutboundUrl(text: string, allowInsecure: boolean): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'is not an absolute URL';
  }
  if (url.protocol !== 'https:' && !(allowInsecure && url.protocol === 'http:')) {
    return allowInsecure ? 'must use http or https' : 'must use https';
  }
  if (url.username || url.password) return 'must not contain credentials';
  if (url.hash) return 'must not contain a fragment';
  return null;
}

/** The egress policy's cheap half (`@tdp/egress/policy`): the refused address a URL names literally. */
export interface LiteralEgressCheck {
  refusedLiteral(url: string): string | null;
}

/**
 * Refuses at input a URL whose host is an address the egress policy refuses (`127.0.0.1`, `[::1]`,
 * `2130706433`…): 422 `EGRESS_REFUSED`. Names are checked when connecting, where the policy holds anyway.
 */
export function refuseLiteralEgress(egress: LiteralEgressCheck | undefined, url: string, path: string): void {
  if (!egress?.refusedLiteral(url)) return;
  const problem = 'names an address TDP does not connect to (egress policy)';
  throw new AppError('EGRESS_REFUSED', `${path.slice(1).replaceAll('/', '.')} ${problem}`, [
    { path, message: problem },
  ]);
}
