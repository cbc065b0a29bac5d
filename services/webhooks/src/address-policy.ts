import net from 'node:net';

/**
 * Which addresses a delivery may connect to (SSRF protection): only public unicast ones. A
 * receiver URL is chosen by a customer, so without this check a webhook could reach the mesh's
 * own services, a cloud metadata endpoint (169.254.169.254, fd00:ec2::254) or anything else on
 * the private network, and report what answered in the delivery log.
 */

interface Range {
  base: bigint;
  bits: number;
}

/** Private, shared, loopback, link-local, documentation, benchmarking, multicast and reserved IPv4 space. */
const blockedIpv4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '255.255.255.255/32',
].map((cidr) => rangeOf(cidr, ipv4Value));

/**
 * IANA assigns global unicast IPv6 only from 2000::/3, so everything outside it is refused
 * (::, ::1, IPv4-compatible ::/96, 64:ff9b:1::/48, 100::/64, fc00::/7, fe80::/10, fec0::/10,
 * ff00::/8, …) except the forms that carry an IPv4 address, which are judged by that address.
 */
const globalUnicast = rangeOf('2000::/3', ipv6Value);

/** The special-purpose blocks inside 2000::/3: IETF protocol assignments (incl. Teredo) and documentation. */
const blockedIpv6 = ['2001::/23', '2001:db8::/32', '3fff::/20'].map((cidr) => rangeOf(cidr, ipv6Value));

const ipv4Mapped = rangeOf('::ffff:0:0/96', ipv6Value);
const nat64 = rangeOf('64:ff9b::/96', ipv6Value);
const sixToFour = rangeOf('2002::/16', ipv6Value);

/**
 * Whether a delivery must not connect to `address` (an IP address as text, IPv6 without
 * brackets). Anything that is not an IP address is refused, and so is an IPv6 address with a
 * zone (`fe80::1%eth0`): scoped addresses are never public.
 */
export function isBlockedAddress(address: string): boolean {
  if (net.isIPv4(address)) return isBlockedIpv4(ipv4Value(address));
  if (!net.isIPv6(address) || address.includes('%')) return true;
  const value = ipv6Value(address);
  // Mapped and NAT64 addresses are connected to over IPv4 (by the host or by the NAT64 gateway),
  // and a 6to4 address is routed to its IPv4 address: each is as reachable as the address it carries.
  if (inRange(value, ipv4Mapped, 128) || inRange(value, nat64, 128)) return isBlockedIpv4(value & 0xffffffffn);
  if (inRange(value, sixToFour, 128)) return isBlockedIpv4((value >> 80n) & 0xffffffffn);
  return !inRange(value, globalUnicast, 128) || blockedIpv6.some((range) => inRange(value, range, 128));
}

function isBlockedIpv4(value: bigint): boolean {
  return blockedIpv4.some((range) => inRange(value, range, 32));
}

function inRange(value: bigint, range: Range, width: number): boolean {
  const shift = BigInt(width - range.bits);
  return value >> shift === range.base >> shift;
}

function rangeOf(cidr: string, parse: (address: string) => bigint): Range {
  const [address, bits] = cidr.split('/');
  return { base: parse(address), bits: Number(bits) };
}

/** A dotted-quad IPv4 address (already validated) as a number. */
function ipv4Value(address: string): bigint {
  return address.split('.').reduce((value, octet) => (value << 8n) | BigInt(octet), 0n);
}

/** An IPv6 address (already validated, no zone) as a number: `::` expanded, an IPv4 tail converted. */
function ipv6Value(address: string): bigint {
  const tail = /\d+\.\d+\.\d+\.\d+$/.exec(address);
  let text = address;
  if (tail) {
    const ipv4 = ipv4Value(tail[0]);
    text = `${address.slice(0, tail.index)}${(ipv4 >> 16n).toString(16)}:${(ipv4 & 0xffffn).toString(16)}`;
  }
  const [head, rest] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = rest ? rest.split(':') : [];
  const groups = rest === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return groups.reduce((value, group) => (value << 16n) | BigInt(Number.parseInt(group, 16)), 0n);
}
