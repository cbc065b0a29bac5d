import type { LookupAddress } from 'node:dns';
import { Resolver } from 'node:dns/promises';

/**
 * How receivers' names become addresses (docs/webhooks.md#where-deliveries-may-go): DNS queries
 * for A and AAAA records through c-ares (node:dns/promises `Resolver`), which waits on sockets
 * of the event loop. dns.lookup would run getaddrinfo on libuv's thread pool (4 threads, shared
 * with file and crypto work): four names whose server never answers would hold every thread, and
 * every other delivery's resolution would wait behind them.
 *
 * The system's hosts file is not read (c-ares queries name servers only): the names it holds are
 * this machine's and its neighbours', which a customer's receiver must not reach anyway, and
 * `localhost` is answered by the sender itself.
 */

export interface DnsResolverOptions {
  /** The longest a name may take, both queries together. */
  timeoutMs: number;
  /** Name servers to ask instead of the system's (`address` or `address:port`). */
  servers?: string[];
}

/** A name that did not resolve, for whatever reason (no such name, no answer in time, a server failure). */
export class DnsError extends Error {
  constructor(
    readonly hostname: string,
    readonly code: string,
  ) {
    super(`${hostname} did not resolve (${code})`);
  }
}

/**
 * After one family's answer, how long the other one is waited for (RFC 8305's Resolution Delay):
 * a server that answers A at once but never AAAA (or the reverse) costs this, not the timeout.
 */
const secondFamilyWaitMs = 50;

/** Why `servers` cannot be name servers (undefined when they can). */
export function checkDnsServers(servers: string[]): string | undefined {
  if (servers.length === 0) return undefined;
  try {
    new Resolver().setServers(servers);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

export class DnsResolver {
  private readonly resolver: Resolver;

  constructor(private readonly options: DnsResolverOptions) {
    // One try per server, each bounded by the timeout; the timer of `resolve` bounds the whole.
    this.resolver = new Resolver({ timeout: options.timeoutMs, tries: 1 });
    if (options.servers && options.servers.length > 0) this.resolver.setServers(options.servers);
  }

  /**
   * Every address of `hostname` of `family` (0: both; IPv4 first), or a DnsError once no query
   * found one within the timeout. A query still running then is left to end on its own (a
   * shared resolver's `cancel` would end other deliveries' queries too).
   */
  resolve(hostname: string, family: 0 | 4 | 6 = 0): Promise<LookupAddress[]> {
    const families: Array<4 | 6> = family === 0 ? [4, 6] : [family];
    return new Promise((resolve, reject) => {
      const found: LookupAddress[][] = families.map(() => []);
      let pending = families.length;
      let failure = '';
      let settled = false;
      let second: NodeJS.Timeout | undefined;
      const settle = () => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        clearTimeout(second);
        const addresses = found.flat();
        if (addresses.length > 0) resolve(addresses);
        else reject(new DnsError(hostname, failure || 'ETIMEOUT'));
      };
      const deadline = setTimeout(settle, this.options.timeoutMs);
      families.forEach((queried, index) => {
        const query = queried === 4 ? this.resolver.resolve4(hostname) : this.resolver.resolve6(hostname);
        query
          .then(
            (addresses) => {
              found[index] = addresses.map((address) => ({ address, family: queried }));
            },
            (err: NodeJS.ErrnoException) => {
              // NXDOMAIN or no record of one family is an answer; the first failure names the whole.
              failure ||= err.code ?? 'EDNS';
            },
          )
          .finally(() => {
            pending -= 1;
            if (pending === 0) settle();
            else if (found[index].length > 0) second ??= setTimeout(settle, secondFamilyWaitMs);
          });
      });
    });
  }
}
