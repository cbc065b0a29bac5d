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

/**
 * How many buckets one replica tracks at most (docs/conventions.md#rate-limits): at most about
 * 25 MB of windows, far more distinct callers in a minute than one replica serves, and a bound a
 * flood of client addresses cannot push memory past.
 */
export const maxTrackedBuckets = 100_000;

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
  /** The open windows in the order they opened (a reopened window moves to the end), so the oldest is first. */
  private readonly windows = new Map<string, Window>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    readonly limits: RestRateLimits,
    private readonly now: () => number = Date.now,
    private readonly maxBuckets = maxTrackedBuckets,
  ) {
    // Windows that have closed are dropped once a window: memory stays bounded by the buckets of one minute.
    this.sweeper = setInterval(() => this.sweep(this.now()), windowMs);
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
      if (window) this.windows.delete(bucket);
      else if (this.windows.size >= this.maxBuckets) {
        this.sweep(now);
        // docs/conventions.md#rate-limits: every tracked window is still open, so a new bucket
        // waits for the oldest to close; the callers already counted keep their limits.
        const oldest = this.windows.values().next().value;
        if (oldest && this.windows.size >= this.maxBuckets) refuse(res, limit, secondsLeft(oldest, now));
      }
      window = { start: now, count: 0 };
      this.windows.set(bucket, window);
    }
    const resetSeconds = secondsLeft(window, now);
    if (window.count >= limit) refuse(res, limit, resetSeconds);
    window.count += 1;
    setHeaders(res, limit, limit - window.count, resetSeconds);
  }

  /** Stops the sweeper (the gateway's shutdown). */
  stop(): void {
    clearInterval(this.sweeper);
  }

  /** Drops the closed windows: the oldest come first, so it stops at the first open one. */
  private sweep(now: number): void {
    for (const [bucket, window] of this.windows) {
      if (now - window.start < windowMs) return;
      this.windows.delete(bucket);
    }
  }
}

/** Whole seconds (at least 1) until `window` closes. */
const secondsLeft = (window: Window, now: number) => Math.max(1, Math.ceil((window.start + windowMs - now) / 1000));

/** The IETF RateLimit-Policy and RateLimit headers of a counted request. */
function setHeaders(res: http.ServerResponse, limit: number, remaining: number, resetSeconds: number): void {
  res.setHeader('RateLimit-Policy', `"default";q=${limit};w=${windowSeconds}`);
  res.setHeader('RateLimit', `"default";r=${remaining};t=${resetSeconds}`);
}

/** 429 rate_limited with Retry-After (docs/conventions.md#rate-limits); the request is not counted. */
function refuse(res: http.ServerResponse, limit: number, resetSeconds: number): never {
  setHeaders(res, limit, 0, resetSeconds);
  throw catalogued(errorCatalogue.rateLimited, { metadata: { retry_after_seconds: resetSeconds }, headers: { 'Retry-After': String(resetSeconds) } });
}
