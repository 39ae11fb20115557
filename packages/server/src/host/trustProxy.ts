/**
 * `TDP_TRUST_PROXY`: which proxies' X-Forwarded-* headers the server believes. Unset, none: a client
 * could otherwise claim TLS or any address. A number trusts that many hops; otherwise a comma-separated
 * list of addresses, CIDRs and the names `loopback`, `linklocal`, `uniquelocal`. Not `true`: trusting
 * every peer is the unset case's danger with a different name.
 */
import { isIP } from 'node:net';
import type { TrustProxy } from '../adapters/inbound/http/app.ts';
import { ConfigError } from './settings.ts';

const names = new Set(['loopback', 'linklocal', 'uniquelocal']);

function validEntry(entry: string): boolean {
  if (names.has(entry)) return true;
  const [address, prefix, ...rest] = entry.split('/');
  const family = isIP(address ?? '');
  if (!family || rest.length > 0) return false;
  if (prefix === undefined) return true;
  const bits = Number(prefix);
  return /^\d+$/.test(prefix) && bits <= (family === 4 ? 32 : 128);
}

export function parseTrustProxy(raw: string | undefined): TrustProxy | undefined {
  const value = raw?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) || false;
  const entries = value.split(',').map((entry) => entry.trim().toLowerCase());
  const wrong = entries.filter((entry) => !validEntry(entry));
  if (wrong.length > 0)
    throw new ConfigError(
      `TDP_TRUST_PROXY: ${wrong.join(', ')} is not an address, a CIDR, loopback, linklocal or uniquelocal`,
    );
  return entries.join(',');
}
