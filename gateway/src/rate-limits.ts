import type http from 'node:http';
import { catalogued, errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { throttleKeyOfIp } from '@switchboard/runtime/ip';
import type { Principal } from './auth.js';

/** The window of every REST rate limit (docs/conventions.md#rate-limits): "per minute". */
const windowMs = 60_000;
const windowSeconds = windowMs / 1000;

/** The limits, in requests per minute (REST_RATE_LIMIT_PER_MINUTE, REST_RATE_LIMIT_PER_IP_PER_MINUTE). */
export interface RestRateLimits {
  perPrincipal: number;
  perAddress: number;
}

interface Window {
  /** When this bucket's window opened (its first request), in ms since the epoch. */
  start: number;
  count: number;
}

/**
 * The REST surface's rate limits (docs/conventions.md#rate-limits): a fixed window of 60 s per
 * principal (a user, or an API key) or, for routes without credentials, per client address (an
 * IPv6 address by its /64). The window opens at a bucket's first request, so a client's minute
 * is its own (no synchronised reset of every client at :00).
 *
 * In memory, per replica: a counter costs a Map lookup (docs/conventions.md#rate-limits has the
 * figure), where a shared counter would cost a NATS or Postgres round trip on every request.
 * With N replicas behind a balancer a client may get up to N times the limit; the documentation
 * says how to size it.
 */
export class RateLimiter {
  private readonly windows = new Map<string, Window>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    readonly limits: RestRateLimits,
    private readonly now: () => number = Date.now,
  ) {
    // Windows that have closed are dropped once a window: memory stays bounded by the buckets of one minute.
    this.sweeper = setInterval(() => this.sweep(), windowMs);
    this.sweeper.unref();
  }

  /**
   * Counts one request of `principal` (or of `clientIp` without one), sets the IETF
   * RateLimit-Policy and RateLimit headers (draft-ietf-httpapi-ratelimit-headers) on `res`, and
   * throws 429 `rate_limited` with Retry-After once the bucket's limit is used up.
   */
  take(res: http.ServerResponse, principal: Principal | undefined, clientIp: string | undefined): void {
    const [bucket, limit] = principal
      ? [principal.keyId ? `key:${principal.keyId}` : `user:${principal.userId}`, this.limits.perPrincipal]
      : [`ip:${clientIp ? throttleKeyOfIp(clientIp) : '-'}`, this.limits.perAddress];
    const now = this.now();
    let window = this.windows.get(bucket);
    if (!window || now - window.start >= windowMs) {
      window = { start: now, count: 0 };
      this.windows.set(bucket, window);
    }
    const resetSeconds = Math.max(1, Math.ceil((window.start + windowMs - now) / 1000));
    const allowed = window.count < limit;
    if (allowed) window.count += 1;
    res.setHeader('RateLimit-Policy', `"default";q=${limit};w=${windowSeconds}`);
    res.setHeader('RateLimit', `"default";r=${limit - window.count};t=${resetSeconds}`);
    if (!allowed) {
      throw catalogued(errorCatalogue.rateLimited, { metadata: { retry_after_seconds: resetSeconds }, headers: { 'Retry-After': String(resetSeconds) } });
    }
  }

  /** Stops the sweeper (the gateway's shutdown). */
  stop(): void {
    clearInterval(this.sweeper);
  }

  private sweep(): void {
    const now = this.now();
    for (const [bucket, window] of this.windows) if (now - window.start >= windowMs) this.windows.delete(bucket);
  }
}
