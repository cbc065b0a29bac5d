import type { LookupAddress } from 'node:dns';
import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { isBlockedAddress } from './address-policy.js';
import { DnsError, DnsResolver } from './resolver.js';

/**
 * One delivery attempt over HTTPS: a POST whose outcome is a DeliveryResult, never an exception.
 * Built on node:https rather than fetch/undici because a delivery must never follow a redirect
 * and must connect to exactly the address its SSRF check approved.
 */

export type ErrorClass = 'dns' | 'connect' | 'tls' | 'timeout' | 'blocked_address' | 'http';

export interface DeliveryRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** The keep-alive pool the attempt uses, e.g. the endpoint id. */
  poolKey: string;
}

export interface DeliveryResult {
  /** Whether a 2xx arrived, body included, within the timeout. */
  ok: boolean;
  /** The response's status; 0 when no response arrived. */
  statusCode: number;
  /** Null on success. */
  errorClass: ErrorClass | null;
  durationMs: number;
  /** The first 4 KiB of the response body as UTF-8 (invalid sequences replaced); null when no response arrived. */
  responseBody: string | null;
  /** Only for 429 and 503 with a valid Retry-After (delta seconds or IMF-fixdate). */
  retryAfterMs?: number;
}

export interface WebhookSenderOptions {
  /** Skips the address policy: for development meshes whose receivers run on localhost. */
  allowPrivateTargets: boolean;
  /** The deadline of a whole attempt: DNS, connect, TLS, response headers and the capped body. */
  timeoutMs?: number;
  maxSocketsPerPool?: number;
  /** A CA trusted besides the default ones (tests' local receivers). */
  ca?: string | Buffer;
  /** The longest a receiver's name may take to resolve (WEBHOOK_DNS_TIMEOUT); then the attempt fails as `dns`. */
  dnsTimeoutMs?: number;
  /** Name servers asked instead of the system's (WEBHOOK_DNS_SERVERS). */
  dnsServers?: string[];
}

const maxBodyBytes = 4096;
const defaultTimeoutMs = 15_000;
const defaultMaxSockets = 8;
const defaultDnsTimeoutMs = 5_000;
/** Pools kept at once: one per recently used endpoint; the least recently used beyond this are closed. */
const maxPools = 1000;
const idleSocketMs = 30_000;
const imfFixdate = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/** A host resolved to an address the policy refuses; raised from the pool's lookup so no socket is ever opened to it. */
class BlockedAddressError extends Error {}

export class WebhookSender {
  private readonly allowPrivateTargets: boolean;
  private readonly timeoutMs: number;
  private readonly maxSockets: number;
  private readonly ca: (string | Buffer)[] | undefined;
  private readonly resolver: DnsResolver;
  /** Keep-alive agents by pool key, least recently used first (Map keeps insertion order). */
  private readonly agents = new Map<string, https.Agent>();

  constructor(options: WebhookSenderOptions) {
    this.allowPrivateTargets = options.allowPrivateTargets;
    this.timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
    this.maxSockets = options.maxSocketsPerPool ?? defaultMaxSockets;
    this.ca = options.ca === undefined ? undefined : withDefaultCas(options.ca);
    this.resolver = new DnsResolver({ timeoutMs: options.dnsTimeoutMs ?? defaultDnsTimeoutMs, servers: options.dnsServers });
  }

  async send(request: DeliveryRequest): Promise<DeliveryResult> {
    const started = performance.now();
    const fail = (errorClass: ErrorClass): DeliveryResult => ({
      ok: false,
      statusCode: 0,
      errorClass,
      durationMs: Math.round(performance.now() - started),
      responseBody: null,
    });
    let url: URL;
    try {
      url = new URL(request.url);
    } catch {
      return fail('connect');
    }
    // Receiver URLs are validated as https:// when registered; anything else here is refused, never sent in clear.
    if (url.protocol !== 'https:') return fail('connect');
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    // Node connects to an IP literal without calling the pool's lookup, so it is checked here.
    if (!this.allowPrivateTargets && net.isIP(host) && isBlockedAddress(host)) return fail('blocked_address');
    try {
      return await this.post(url, host, request, started);
    } catch {
      // https.request throws synchronously on invalid headers (e.g. a CR/LF in a value).
      return fail('connect');
    }
  }

  /** Destroys every pooled socket (shutdown). */
  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  private post(url: URL, host: string, request: DeliveryRequest, started: number): Promise<DeliveryResult> {
    return new Promise((resolve) => {
      let response: IncomingMessage | undefined;
      const chunks: Buffer[] = [];
      let received = 0;
      let settled = false;
      const settle = (errorClass: ErrorClass | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        const statusCode = response?.statusCode ?? 0;
        const result: DeliveryResult = {
          ok: errorClass === null,
          statusCode,
          errorClass,
          durationMs: Math.round(performance.now() - started),
          // Postgres text cannot hold U+0000: a receiver's binary answer must not make its attempt unrecordable.
          responseBody: response ? Buffer.concat(chunks, received).toString('utf8').replaceAll('\u0000', '\ufffd') : null,
        };
        const retryAfterMs = statusCode === 429 || statusCode === 503 ? retryAfterOf(response?.headers['retry-after']) : undefined;
        if (retryAfterMs !== undefined) result.retryAfterMs = retryAfterMs;
        resolve(result);
      };
      const outcome = (statusCode: number): ErrorClass | null => (statusCode >= 200 && statusCode < 300 ? null : 'http');

      const req = https.request({
        agent: this.agentFor(request.poolKey),
        host,
        port: url.port || 443,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...request.headers, 'content-length': Buffer.byteLength(request.body) },
      });
      const deadline = setTimeout(
        () => {
          settle('timeout');
          req.destroy();
        },
        started + this.timeoutMs - performance.now(),
      );
      req.on('error', (error) => settle(errorClassOf(error)));
      req.on('response', (res) => {
        response = res;
        res.on('error', (error) => settle(errorClassOf(error)));
        res.on('data', (chunk: Buffer) => {
          const kept = chunk.subarray(0, maxBodyBytes - received);
          chunks.push(kept);
          received += kept.length;
          if (received < maxBodyBytes) return;
          settle(outcome(res.statusCode ?? 0));
          // The rest is never read: the socket goes instead of returning to the pool.
          res.destroy();
        });
        res.on('end', () => settle(outcome(res.statusCode ?? 0)));
      });
      req.end(request.body);
    });
  }

  private agentFor(poolKey: string): https.Agent {
    let agent = this.agents.get(poolKey);
    if (agent) {
      this.agents.delete(poolKey);
    } else {
      agent = new https.Agent({
        keepAlive: true,
        maxSockets: this.maxSockets,
        // An agent's timeout closes its idle sockets (an active request only gets a 'timeout' event, unused here).
        timeout: idleSocketMs,
        lookup: this.lookup,
        ca: this.ca,
      });
      if (this.agents.size >= maxPools) this.evictOldest();
    }
    this.agents.set(poolKey, agent);
    return agent;
  }

  /** Closes the least recently used pool's idle sockets; its busy ones finish their attempt and close once idle. */
  private evictOldest(): void {
    const [poolKey, agent] = this.agents.entries().next().value!;
    this.agents.delete(poolKey);
    for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
  }

  /**
   * Resolves a host for a new connection and refuses it if any of its addresses is blocked (not
   * only the one tried first: Node may fall back to the others). The socket then connects to the
   * addresses checked here, so a second, different DNS answer (rebinding) can never be used.
   */
  private readonly lookup: net.LookupFunction = (hostname, options, callback) => {
    const answer = (addresses: LookupAddress[]) => {
      if (!this.allowPrivateTargets && addresses.some(({ address }) => isBlockedAddress(address))) {
        return callback(new BlockedAddressError(`${hostname} resolves to an address deliveries may not reach`), '');
      }
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0].address, addresses[0].family);
    };
    const name = hostname.toLowerCase().replace(/\.$/, '');
    // `localhost` and every name under it are the loopback address by definition (RFC 6761 §6.3):
    // answered here, never asked of a resolver, which might send `*.localhost` off the machine.
    if (isUnder(name, 'localhost')) return answer([{ address: '127.0.0.1', family: 4 }]);
    // `invalid` and every name under it never exist (RFC 6761 §6.4): no server is asked either.
    if (isUnder(name, 'invalid')) return callback(new DnsError(hostname, 'ENOTFOUND'), '');
    const family = options.family === 4 || options.family === 6 ? options.family : 0;
    this.resolver.resolve(name, family).then(answer, (err: Error) => callback(err, ''));
  };
}

/** Whether `name` (lower case, without the final dot) is `domain` or a name under it. */
function isUnder(name: string, domain: string): boolean {
  return name === domain || name.endsWith(`.${domain}`);
}

/** Node's bundled roots plus `extra`: giving `ca` replaces the default store, so the roots are put back. */
function withDefaultCas(extra: string | Buffer): (string | Buffer)[] {
  return [...tls.rootCertificates, extra];
}

function errorClassOf(error: NodeJS.ErrnoException): ErrorClass {
  if (error instanceof BlockedAddressError) return 'blocked_address';
  if (error instanceof DnsError) return 'dns';
  const code = error.code ?? '';
  // OpenSSL's certificate verification codes (DEPTH_ZERO_SELF_SIGNED_CERT, CERT_HAS_EXPIRED, …) and Node's TLS/SSL errors.
  if (
    code === 'EPROTO' ||
    /^ERR_(SSL|TLS|OSSL)_/.test(code) ||
    /CERT|CRL|^UNABLE_TO_/.test(code) ||
    ['INVALID_CA', 'INVALID_PURPOSE', 'PATH_LENGTH_EXCEEDED', 'HOSTNAME_MISMATCH'].includes(code)
  ) {
    return 'tls';
  }
  return 'connect';
}

/** Retry-After as milliseconds from now: delta seconds or an IMF-fixdate (a past date is 0); undefined when absent or malformed. */
function retryAfterOf(value: string | undefined): number | undefined {
  const text = value?.trim() ?? '';
  if (/^\d+$/.test(text)) {
    const ms = Number(text) * 1000;
    return Number.isSafeInteger(ms) ? ms : undefined;
  }
  const date = imfFixdate.test(text) ? Date.parse(text) : Number.NaN;
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
