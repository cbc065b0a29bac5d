import { describe, expect, it } from 'vitest';
import { ConfigError } from '../src/config.js';
import { AddressRanges, forwardedClientIp, throttleKeyOfIp } from '../src/ip.js';

describe('throttleKeyOfIp', () => {
  it('counts IPv4 addresses one by one and IPv6 addresses by their /64', () => {
    expect(throttleKeyOfIp('203.0.113.7')).toBe('203.0.113.7');
    expect(throttleKeyOfIp('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(throttleKeyOfIp('2001:db8:1:2:aaaa:bbbb:cccc:dddd')).toBe('2001:db8:1:2::/64');
    // Every spelling of addresses of one /64 gives the same key; the next /64 another.
    expect(throttleKeyOfIp('2001:0DB8:0001:0002::1')).toBe('2001:db8:1:2::/64');
    expect(throttleKeyOfIp('2001:db8:1:2::ffff:1.2.3.4')).toBe('2001:db8:1:2::/64');
    expect(throttleKeyOfIp('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(throttleKeyOfIp('::1')).toBe('0:0:0:0::/64');
    expect(throttleKeyOfIp('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
  });
});

describe('trusted proxies', () => {
  const trusted = AddressRanges.parse('10.0.0.0/8, 2001:db8:ffff::/48, 192.0.2.1', 'GATEWAY_TRUSTED_PROXIES');

  it('parses CIDRs and single addresses, and refuses anything else naming the variable', () => {
    expect(trusted.size).toBe(3);
    expect(trusted.has('10.1.2.3')).toBe(true);
    expect(trusted.has('::ffff:10.1.2.3')).toBe(true);
    expect(trusted.has('2001:db8:ffff:1::9')).toBe(true);
    expect(trusted.has('192.0.2.1')).toBe(true);
    expect(trusted.has('192.0.2.2')).toBe(false);
    expect(AddressRanges.parse('', 'X').size).toBe(0);
    for (const bad of ['10.0.0.0/33', 'example.com', '10.0.0.0/8/1', '::1/129', '10.0.0.0/x']) {
      expect(() => AddressRanges.parse(bad, 'GATEWAY_TRUSTED_PROXIES')).toThrow(ConfigError);
      expect(() => AddressRanges.parse(bad, 'GATEWAY_TRUSTED_PROXIES')).toThrow(/^GATEWAY_TRUSTED_PROXIES: /);
    }
  });

  it('believes X-Forwarded-For only from trusted proxies, read from the right', () => {
    // Direct client: its own header is ignored.
    expect(forwardedClientIp('198.51.100.9', '1.1.1.1', trusted)).toBe('198.51.100.9');
    // Through one trusted proxy.
    expect(forwardedClientIp('10.0.0.5', '198.51.100.9', trusted)).toBe('198.51.100.9');
    // A client that prepends a spoofed address is still named by the hop the proxy added.
    expect(forwardedClientIp('10.0.0.5', '1.1.1.1, 198.51.100.9', trusted)).toBe('198.51.100.9');
    // Through two trusted proxies.
    expect(forwardedClientIp('10.0.0.5', '198.51.100.9, 10.0.0.7', trusted)).toBe('198.51.100.9');
    // Only proxies in the header: the leftmost is as far as the chain goes.
    expect(forwardedClientIp('10.0.0.5', '10.0.0.6', trusted)).toBe('10.0.0.6');
    // Garbage stops the walk at the last address believed.
    expect(forwardedClientIp('10.0.0.5', 'not-an-ip', trusted)).toBe('10.0.0.5');
    expect(forwardedClientIp('::ffff:10.0.0.5', '2001:db8::1', trusted)).toBe('2001:db8::1');
    expect(forwardedClientIp(undefined, '1.1.1.1', trusted)).toBeUndefined();
  });
});
