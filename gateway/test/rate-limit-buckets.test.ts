import type http from 'node:http';
import type { ApiError } from '@switchboard/runtime/api-error';
import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../src/rate-limits.js';

/**
 * The cap on the buckets one replica tracks (docs/conventions.md#rate-limits), on a limiter of
 * three buckets with its own clock: a new bucket beyond the cap is refused while every window is
 * open, and takes the place of a closed one.
 */

/** A response that keeps the headers set on it. */
function response(): http.ServerResponse & { headers: Map<string, string> } {
  const headers = new Map<string, string>();
  return { headers, setHeader: (name: string, value: string) => headers.set(name.toLowerCase(), value) } as never;
}

/** What a request from `ip` gets: its RateLimit header, or the refusal's status, code and Retry-After. */
function take(limiter: RateLimiter, ip: string): string {
  const res = response();
  try {
    limiter.take(res, undefined, ip);
    return `ok ${res.headers.get('ratelimit')}`;
  } catch (err) {
    const refusal = err as ApiError;
    return `${refusal.status} ${refusal.body('').error.code} retry-after=${refusal.options.headers?.['Retry-After']} ${res.headers.get('ratelimit')}`;
  }
}

describe('the buckets a replica tracks', () => {
  it('refuses a new bucket with 429 rate_limited while every window of a full table is open; the buckets counted already go on', () => {
    let now = 1_000_000;
    const limiter = new RateLimiter({ perPrincipal: 10, perAddress: 10 }, () => now, 3);
    try {
      expect(take(limiter, '192.0.2.1')).toBe('ok "default";r=9;t=60');
      now += 20_000;
      expect(take(limiter, '192.0.2.2')).toBe('ok "default";r=9;t=60');
      expect(take(limiter, '192.0.2.3')).toBe('ok "default";r=9;t=60');
      // Full: the oldest window (192.0.2.1's) closes in 40 s.
      expect(take(limiter, '192.0.2.4')).toBe('429 rate_limited retry-after=40 "default";r=0;t=40');
      expect(take(limiter, '192.0.2.2')).toBe('ok "default";r=8;t=60');
    } finally {
      limiter.stop();
    }
  });

  it('drops closed windows to make room, and a reopened window counts as the newest', () => {
    let now = 1_000_000;
    const limiter = new RateLimiter({ perPrincipal: 10, perAddress: 10 }, () => now, 3);
    try {
      take(limiter, '192.0.2.1');
      now += 10_000;
      take(limiter, '192.0.2.2');
      now += 10_000;
      take(limiter, '192.0.2.3');
      // 192.0.2.1's window closed and reopens: it is now the newest, 192.0.2.2's the oldest.
      now += 45_000;
      expect(take(limiter, '192.0.2.1')).toBe('ok "default";r=9;t=60');
      expect(take(limiter, '192.0.2.4')).toBe('429 rate_limited retry-after=5 "default";r=0;t=5');
      // 192.0.2.2's window closes: the new bucket takes its place.
      now += 5_000;
      expect(take(limiter, '192.0.2.4')).toBe('ok "default";r=9;t=60');
      // 192.0.2.3's window is the oldest now, 10 s from closing.
      expect(take(limiter, '192.0.2.5')).toBe('429 rate_limited retry-after=10 "default";r=0;t=10');
    } finally {
      limiter.stop();
    }
  });
});
