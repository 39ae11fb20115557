/**
 * The egress policy: which addresses a request made on a tenant's behalf may reach. Public unicast
 * addresses are allowed; everything else (loopback, private, CGNAT, link-local, unique-local, multicast,
 * unspecified, broadcast, reserved and documentation ranges, and IPv6 forms that embed an IPv4 address) is
 * refused unless the operator's allow-list (`TDP_EGRESS_ALLOW`) names it, by range or by `host:port`.
 *
 * Pure: no I/O. Addresses are parsed and classified by ipaddr.js, which reads the odd IPv4 spellings
 * (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`) as the WHATWG URL parser does.
 */
import ipaddr from 'ipaddr.js';

/** The allow-list `tdp dev` uses unless `TDP_EGRESS_ALLOW` is set: the developer's own machine. */
export const loopbackAllowList: readonly string[] = ['127.0.0.0/8', '::1/128'];

export class EgressAllowListError extends Error {
  override name = 'EgressAllowListError';
}

export interface EgressPolicy {
  /** The allow-list as written (for start output and logs). */
  readonly allowList: readonly string[];
  /**
   * May a connection go to `address` (an IP, as resolved), reached as `host:port` of the URL? `host` is
   * the URL's host name (no brackets), which a `host:port` entry names.
   */
  allows(address: string, host: string, port: number): boolean;
  /**
   * The refused address a URL names literally (an IP in any spelling the URL parser accepts), or null
   * when its host is a name (checked when connecting) or an allowed address. For cheap checks at input.
   */
  refusedLiteral(url: string): string | null;
}

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/**
 * The policy of an allow-list: comma-separated (or listed) CIDRs (`10.1.0.0/16`, `fd00::/8`), single
 * addresses, and `host:port` pairs (`storage.internal:9000`, `127.0.0.1:8080`, `[::1]:8080`). Throws
 * `EgressAllowListError` on an entry that is none of these.
 */
export function egressPolicy(allow: string | readonly string[] = []): EgressPolicy {
  const allowList = typeof allow === 'string' ? splitAllowList(allow) : [...allow];
  const ranges: Range[] = [];
  const endpoints = new Set<string>();
  for (const entry of allowList) {
    const endpoint = endpointOf(entry);
    if (endpoint) endpoints.add(endpoint);
    else ranges.push(rangeOf(entry));
  }
  const policy: EgressPolicy = {
    allowList,
    allows(address, host, port) {
      const ip = parseAddress(address);
      if (!ip) return false;
      if (endpoints.has(`${normalHost(host)}:${port}`) || endpoints.has(`${ip.toString()}:${port}`))
        return true;
      if (ranges.some(([base, bits]) => base.kind() === ip.kind() && ip.match(base, bits))) return true;
      return isPublicAddress(ip);
    },
    refusedLiteral: (url) => refusedLiteral(policy, url),
  };
  return policy;
}

export const splitAllowList = (text: string): string[] =>
  text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');

/**
 * A public unicast address: IPv4 outside every special range, IPv6 in global unicast (2000::/3) outside
 * every special range. An IPv4-mapped IPv6 address is judged as its IPv4 address.
 */
export function isPublicAddress(address: string | ipaddr.IPv4 | ipaddr.IPv6): boolean {
  const ip = typeof address === 'string' ? parseAddress(address) : address;
  if (!ip) return false;
  if (ip.range() !== 'unicast') return false;
  // IPv6 beyond 2000::/3 is unassigned or embeds an IPv4 address (::a.b.c.d, the compatible form).
  return ip.kind() === 'ipv4' || ip.match(globalUnicast);
}

/** `policy.refusedLiteral(text)`. */
export function refusedLiteral(policy: EgressPolicy, text: string): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!ipaddr.isValid(host)) return null;
  const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
  return policy.allows(host, host, port) ? null : host;
}

const globalUnicast = ipaddr.parseCIDR('2000::/3');

/** An IP address in canonical form (IPv4-mapped IPv6 as IPv4), or null if `text` is not one. */
function parseAddress(text: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  const bare = text.replace(/^\[|\]$/g, '');
  // IPv6 zone ids (fe80::1%eth0) are link-local anyway; ipaddr.js parses the address without the zone.
  if (!ipaddr.isValid(bare)) return null;
  return ipaddr.process(bare);
}

function normalHost(host: string): string {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  const ip = parseAddress(bare);
  return ip ? ip.toString() : bare.replace(/\.$/, '');
}

/** `host:port` as `normalhost:port`, or null when the entry is not a pair. */
function endpointOf(entry: string): string | null {
  const match = /^(\[[^\]]+\]|[^:/[\]]+):(\d{1,5})$/.exec(entry);
  if (!match) return null;
  const port = Number(match[2]);
  if (port < 1 || port > 65_535) throw new EgressAllowListError(`"${entry}" has no valid port`);
  let host: string;
  try {
    host = new URL(`http://${match[1]}`).hostname;
  } catch {
    throw new EgressAllowListError(`"${entry}" is not a host:port pair`);
  }
  return `${normalHost(host)}:${port}`;
}

function rangeOf(entry: string): Range {
  try {
    if (entry.includes('/')) {
      const [base, bits] = ipaddr.parseCIDR(entry);
      // An IPv4-mapped range (::ffff:10.0.0.0/104) is the IPv4 range it maps, as addresses are judged.
      if (base.kind() === 'ipv6' && (base as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96)
        return [(base as ipaddr.IPv6).toIPv4Address(), bits - 96];
      return [base, bits];
    }
    const ip = ipaddr.process(entry);
    return [ip, ip.kind() === 'ipv4' ? 32 : 128];
  } catch {
    throw new EgressAllowListError(`"${entry}" is neither a CIDR, an address nor a host:port pair`);
  }
}
