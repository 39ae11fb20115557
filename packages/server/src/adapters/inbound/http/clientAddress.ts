/**
 * The client a per-address limit counts: an IPv4 address (an IPv4-mapped IPv6 one as IPv4), or an IPv6
 * address's /64 — the block one subscriber is given, in which a client can take a fresh address for
 * every request.
 */
import ipaddr from 'ipaddr.js';

export function clientOf(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const parts = (parsed as ipaddr.IPv6).parts;
  return `${parts
    .slice(0, 4)
    .map((part) => part.toString(16))
    .join(':')}::/64`;
}
