import { catalogued, errorCatalogue, keyRefusalError } from '@switchboard/runtime/error-catalogue';
import type { Logger } from '@switchboard/runtime/log';
import { Money } from '@switchboard/runtime/money';
import { BudgetLeases, type LeaseOwner, type Refusal, type Reservation } from './budget-leases.js';
import { type RateDimension, type ReplicatedKey, rateDimensions } from './key-replica.js';
import type { RateFacts } from './lease-owners.js';

/**
 * A key's rate limits at the front door (docs/api/front-door.md#rate-limits), exact across
 * replicas: each dimension is a budget leased from the keys service like a spend limit
 * (docs/money-path.md#rate-limit-leases), so a request is admitted from memory and the owner
 * keeps what every replica holds within the limit.
 *
 * - requests: 1 per request, in the UTC minute's window; never given back once admitted (a
 *   request refused after the rate limits, by a budget say, still counted).
 * - tokens: the request's estimate (prompt bound + max output) when admitted, corrected to the
 *   actual usage when it is billed (0 when nothing was).
 * - concurrency: 1 while the request runs, back to 0 when it ends.
 *
 * The checks run concurrency, tokens, then requests: what a refusal took of the earlier ones is
 * given back (settled at 0), and only a request every limit admits counts as a request.
 */

export type RateLeases = Record<RateDimension, BudgetLeases<RateFacts>>;

/**
 * The leases of each dimension. A requests or tokens lease ends with its window (the UTC
 * minute): its expiry is not a loss of room, so it is used to its last moment (no margin). A
 * concurrency lease is asked for one slot at a time (more when requests wait for it, or it was
 * outgrown), grows only when a request finds it full (its use comes back, so it is not renewed
 * ahead), and is given back after a second idle: slots a replica holds and does not use would
 * starve the other replicas of the key (the owner only shares what no lease holds).
 */
export function rateLeases(log: Logger, owner: (dimension: RateDimension) => LeaseOwner<RateFacts>): RateLeases {
  return {
    requests: new BudgetLeases({ name: 'requests rate', log, owner: owner('requests'), expiryMarginMs: 0 }),
    tokens: new BudgetLeases({ name: 'tokens rate', log, owner: owner('tokens'), expiryMarginMs: 0 }),
    concurrency: new BudgetLeases({ name: 'concurrency rate', log, owner: owner('concurrency'), idleMs: 1000, requestsPerGrant: 1, renewAhead: false }),
  };
}

/** What an admitted request holds until it ends. */
export interface RateHold {
  /** The request's actual tokens (its usage), once billed. */
  settleTokens(actual: number): void;
  /** The request ended: its concurrency slot is free, and its tokens are settled at 0 unless they were. */
  end(): void;
}

/** The headers' dimensions: concurrency has none (OpenAI's set has none for it). */
const headerDimensions = ['requests', 'tokens'] as const;

const noHold: RateHold = { settleTokens() {}, end() {} };
const zero = new Money(0);
const one = new Money(1);

export class RateLimiter {
  constructor(private readonly leases: RateLeases) {}

  start(): void {
    for (const dimension of rateDimensions) this.leases[dimension].start();
  }

  async stop(): Promise<void> {
    await Promise.allSettled(rateDimensions.map((dimension) => this.leases[dimension].stop()));
  }

  /** A key's limits changed: the leases granted under the old ones are given back. */
  forget(keyId: string): void {
    for (const dimension of rateDimensions) this.leases[dimension].forget(keyId);
  }

  /**
   * OpenAI's x-ratelimit-* headers for the limits the key has, from what this replica knows now
   * (no call): the owner's remaining at its last grant plus the lease's unused part, and the
   * seconds to the window's end (the UTC minute).
   */
  headers(key: ReplicatedKey, now = Date.now()): Record<string, string> {
    const headers: Record<string, string> = {};
    for (const dimension of headerDimensions) {
      const limit = key.rateLimits[dimension];
      if (limit === undefined) continue;
      const known = this.leases[dimension].peek(key.keyId);
      setHeaders(headers, dimension, limit, known && { facts: known.facts, left: known.left }, now);
    }
    return headers;
  }

  /**
   * Admits a request of `tokens` (its estimate) for `key`, or throws its 429 (or the key's
   * refusal the owner knows of first). `headers` receives the x-ratelimit-* headers as they stand
   * after the admission, or at the refusal.
   */
  async admit(key: ReplicatedKey, tokens: number, headers: (headers: Record<string, string>) => void): Promise<RateHold> {
    const limits = key.rateLimits;
    if (limits.requests === undefined && limits.tokens === undefined && limits.concurrency === undefined) return noHold;
    const now = Date.now();
    const held: Partial<Record<RateDimension, Reservation<RateFacts>>> = {};
    const seen: Partial<Record<RateDimension, { facts: RateFacts; left?: Money }>> = {};
    const giveBack = () => {
      for (const reservation of Object.values(held)) reservation.settle(zero);
    };
    const amounts: Record<RateDimension, Money> = { concurrency: one, tokens: new Money(tokens), requests: one };
    for (const dimension of ['concurrency', 'tokens', 'requests'] as const) {
      if (limits[dimension] === undefined) continue;
      let reserved: Reservation<RateFacts> | Refusal<RateFacts>;
      try {
        reserved = await this.leases[dimension].reserve(key.keyId, amounts[dimension]);
      } catch (err) {
        giveBack();
        throw err;
      }
      if (!reserved.ok) {
        giveBack();
        if (reserved.refusal) throw keyRefusalError({ reason: reserved.refusal }, 'front-door')!;
        seen[dimension] = { facts: reserved.facts, left: zero };
        headers(this.headersOf(key, seen, now));
        throw rateLimitExceeded(dimension, reserved.facts.limit ?? limits[dimension]!, reserved.facts.resetsAt, now);
      }
      held[dimension] = reserved;
      seen[dimension] = { facts: reserved.facts, left: reserved.left };
    }
    headers(this.headersOf(key, seen, now));
    // Counted once admitted, whatever follows: nothing of a request's count comes back.
    held.requests?.settle(one);
    let tokensSettled = false;
    return {
      settleTokens(actual) {
        tokensSettled = true;
        held.tokens?.settle(new Money(actual));
      },
      end() {
        if (!tokensSettled) held.tokens?.settle(zero);
        held.concurrency?.settle(zero);
      },
    };
  }

  /** The headers with what this admission saw, the other dimensions as they stand. */
  private headersOf(key: ReplicatedKey, seen: Partial<Record<RateDimension, { facts: RateFacts; left?: Money }>>, now: number): Record<string, string> {
    const headers: Record<string, string> = {};
    for (const dimension of headerDimensions) {
      const limit = key.rateLimits[dimension];
      if (limit === undefined) continue;
      setHeaders(headers, dimension, limit, seen[dimension] ?? this.leases[dimension].peek(key.keyId), now);
    }
    return headers;
  }
}

function setHeaders(
  headers: Record<string, string>,
  dimension: 'requests' | 'tokens',
  keyLimit: number,
  known: { facts: RateFacts; left?: Money } | undefined,
  now: number,
): void {
  const limit = known?.facts.limit ?? keyLimit;
  // Without a lease (none asked for in this window yet, or the owner's "no limit") the whole limit is the best guess.
  const remaining = known?.left === undefined ? limit : Math.max(0, Math.min(limit, known.facts.remaining + Math.floor(known.left.toNumber())));
  headers[`x-ratelimit-limit-${dimension}`] = String(limit);
  headers[`x-ratelimit-remaining-${dimension}`] = String(remaining);
  headers[`x-ratelimit-reset-${dimension}`] = `${secondsUntil(known?.facts.resetsAt, now)}s`;
}

/** Whole seconds to the window's end, at least 1: the owner's when it said, else the end of this UTC minute. */
function secondsUntil(resetsAt: Date | undefined, now: number): number {
  const end = resetsAt?.getTime() ?? (Math.floor(now / 60_000) + 1) * 60_000;
  return Math.max(1, Math.ceil((end - now) / 1000));
}

/** 429 rate_limit_exceeded with Retry-After; concurrency has no window: a slot frees when a request ends, so a second. */
function rateLimitExceeded(dimension: RateDimension, limit: number, resetsAt: Date | undefined, now: number) {
  const resetSeconds = dimension === 'concurrency' ? 1 : secondsUntil(resetsAt, now);
  return catalogued(
    errorCatalogue.rateLimitExceeded,
    { metadata: { limit, scope: dimension, reset_seconds: resetSeconds }, headers: { 'retry-after': String(resetSeconds) } },
    'front-door',
  );
}
