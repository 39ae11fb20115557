/**
 * The connection half of the policy: an undici Agent whose connector resolves the host name once, checks
 * every address it resolved to, and connects to exactly those addresses — there is no second lookup a
 * rebinding DNS server could answer differently. A literal IP host (for which `net.connect` would skip the
 * lookup) is checked as it is. TLS keeps the URL's name for SNI and the certificate check.
 */
import { type LookupAddress, lookup as systemLookup } from 'node:dns';
import { isIP } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { EgressError } from './errors.ts';
import type { EgressPolicy } from './policy.ts';

type Lookup = (host: string) => Promise<LookupAddress[]>;

export interface EgressAgentOptions {
  /** How long opening a connection (TCP and TLS) may take (default 10 s). */
  connectTimeoutMs?: number;
  /** Name resolution (default: the system resolver, every address). For tests. */
  lookup?: Lookup;
}

const resolveAll: Lookup = (host) =>
  new Promise((resolve, reject) =>
    systemLookup(host, { all: true }, (error, addresses) => (error ? reject(error) : resolve(addresses))),
  );

/** An Agent that connects only where `policy` allows; a refused address fails with `EGRESS_REFUSED`. */
export function egressAgent(policy: EgressPolicy, options: EgressAgentOptions = {}): Agent {
  const timeout = options.connectTimeoutMs ?? 10_000;
  const lookup = options.lookup ?? resolveAll;
  return new Agent({
    connect(params, callback) {
      const host = params.hostname.replace(/^\[|\]$/g, '');
      const port = Number(params.port) || (params.protocol === 'https:' ? 443 : 80);
      const checked: Promise<LookupAddress[]> = isIP(host)
        ? Promise.resolve([{ address: host, family: isIP(host) }])
        : lookup(host);
      checked.then(
        (addresses) => {
          if (addresses.length === 0 || !addresses.every((a) => policy.allows(a.address, host, port)))
            return callback(new EgressError('EGRESS_REFUSED'), null);
          // The connection may only use the addresses just checked: `lookup` hands them back as they are.
          const connect = buildConnector({
            timeout,
            lookup: (_name, opts, done) => {
              if ((opts as { all?: boolean }).all) return (done as AllDone)(null, addresses);
              const first = addresses[0]!;
              (done as OneDone)(null, first.address, first.family);
            },
          } as buildConnector.BuildOptions);
          connect({ ...params, hostname: host }, callback);
        },
        // A name that does not resolve looks like any other place that does not answer.
        (error: unknown) => callback(new EgressError('EGRESS_UNREACHABLE', { cause: error }), null),
      );
    },
  });
}

type AllDone = (error: Error | null, addresses: LookupAddress[]) => void;
type OneDone = (error: Error | null, address: string, family: number) => void;
