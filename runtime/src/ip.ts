import net from 'node:net';
import { ConfigError } from './config.js';

/**
 * Client addresses: which proxies may speak for a client (X-Forwarded-For), and the key a
 * throttle counts an address under.
 */

/** An IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) as the IPv4 address it carries. */
export function unmapIp(address: string): string {
  return address.toLowerCase().startsWith('::ffff:') && net.isIPv4(address.slice(7)) ? address.slice(7) : address;
}

/** The eight 16-bit groups of an IPv6 address (`::` expanded, an embedded IPv4 tail converted). */
function ipv6Groups(address: string): number[] {
  let text = address.toLowerCase();
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail) {
    const [a, b, c, d] = tail[1].split('.').map(Number);
    text = `${text.slice(0, -tail[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, rest] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = rest !== undefined && rest !== '' ? rest.split(':') : [];
  const missing = 8 - left.length - right.length;
  return [...left, ...Array(rest === undefined ? 0 : missing).fill('0'), ...right].map((group) => Number.parseInt(group, 16));
}

/**
 * The key a throttle counts `address` under: an IPv4 address itself, an IPv6 address its /64
 * (one subscriber usually holds a whole /64, so counting single IPv6 addresses would let a
 * client rotate through 2^64 of them), e.g. `2001:db8:1:2::/64`. Anything else as it is.
 */
export function throttleKeyOfIp(address: string): string {
  const ip = unmapIp(address.trim());
  if (!net.isIPv6(ip)) return ip;
  const groups = ipv6Groups(ip);
  return `${groups
    .slice(0, 4)
    .map((group) => group.toString(16))
    .join(':')}::/64`;
}

/** A set of address ranges, e.g. the proxies trusted to set X-Forwarded-For. */
export class AddressRanges {
  private constructor(
    private readonly list: net.BlockList,
    readonly size: number,
  ) {}

  /** Parses comma-separated CIDRs or single addresses (IPv4 and IPv6); errors name `variable`. */
  static parse(raw: string, variable: string): AddressRanges {
    const list = new net.BlockList();
    const entries = raw
      .split(',')
      .map((entry) => entry.trim())
      .filter(Boolean);
    for (const entry of entries) {
      const [address, prefixText, extra] = entry.split('/');
      const family = net.isIPv4(address) ? 'ipv4' : net.isIPv6(address) ? 'ipv6' : undefined;
      const max = family === 'ipv4' ? 32 : 128;
      const prefix = prefixText === undefined ? max : Number(prefixText);
      if (!family || extra !== undefined || !/^\d{1,3}$/.test(prefixText ?? String(max)) || prefix > max) {
        throw new ConfigError(`${variable}: "${entry}" is not an IP address or CIDR range (e.g. 10.0.0.0/8, 2001:db8::/32)`);
      }
      list.addSubnet(address, prefix, family);
    }
    return new AddressRanges(list, entries.length);
  }

  has(address: string): boolean {
    const ip = unmapIp(address);
    if (net.isIPv4(ip)) return this.list.check(ip, 'ipv4');
    return net.isIPv6(ip) && this.list.check(ip, 'ipv6');
  }
}

/**
 * The client's address: the socket's, unless the socket is a trusted proxy, in which case
 * X-Forwarded-For is read from the right, skipping trusted proxies; the first address that is
 * not one is the client. A client cannot spoof it by sending its own X-Forwarded-For: the
 * entries left of the first untrusted hop are never read.
 */
export function forwardedClientIp(socketAddress: string | undefined, forwardedFor: string | undefined, trusted?: AddressRanges): string | undefined {
  if (!socketAddress) return undefined;
  let client = unmapIp(socketAddress);
  if (!forwardedFor || !trusted?.has(client)) return client;
  const hops = forwardedFor
    .split(',')
    .map((hop) => hop.trim())
    .filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = unmapIp(hops[i]);
    if (!net.isIP(hop)) break;
    client = hop;
    if (!trusted.has(hop)) break;
  }
  return client;
}
