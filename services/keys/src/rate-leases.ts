import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { KeyRefusal, type LeaseRateResponseSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import { refusalReason } from './authorization.js';
import { keyRefusal } from './cap-leases.js';
import { lockKeyBudget } from './store/cap-leases.js';
import { findLiveRateLease, insertRateLease, otherRateLeases, type RateDimension, releaseRateLease, renewRateLease } from './store/rate-leases.js';

/**
 * Rate-limit leases (docs/money-path.md#rate-limit-leases): a key's requests and tokens per UTC
 * minute and its concurrent requests, exact across any number of data plane replicas. A replica
 * is granted a slice and admits requests against it without asking. Under the lock of the key's
 * budget (rotated keys share their limits' counts), for the key's limit L of a dimension:
 *   requests, tokens: Σ granted of the leases of the window (the UTC minute) ≤ L; a lease is of
 *     one window and ends with it, so a new minute starts with nothing held.
 *   concurrency:      Σ granted of the unexpired leases ≤ L; a lease lasts LEASE_TTL unless
 *     renewed, and holds one more TTL after that (requests of a holder that lost touch may still
 *     run), like a budget lease.
 * A grant or renewal of a lease holding `used` (requests admitted, tokens counted, slots in use)
 * asks for `want` more and accepts no less than `min`, shared as budget leases are:
 *   room = L − other leases − used;  headroom = 0 when room < min, else
 *   max(min, min(want, ⌊room ÷ (other leases holding some + 1)⌋)).
 * A renewal of a lease of a past window is a new lease: what it used counted in its own window.
 */

export type RateLeaseAnswer = MessageInitShape<typeof LeaseRateResponseSchema>;

const dimensions: readonly RateDimension[] = ['requests', 'tokens', 'concurrency'];
const minuteMs = 60_000;

export interface RateLeasesDeps {
  db: Knex;
  /** LEASE_TTL: how long a concurrency lease holds its slots without a renewal. */
  leaseTtlMs: number;
  clock?: Clock;
}

export interface RateLeaseRequest {
  keyId: string;
  dimension: string;
  leaseId: string;
  holder: string;
  used: string;
  want: string;
  min: string;
}

/** A whole number of the request as a decimal string; '' is 0 where the field may be left out. */
function count(raw: string, field: string, optional: boolean): number {
  if (raw === '' && optional) return 0;
  if (!/^\d{1,15}$/.test(raw)) throw invalidArgument(field, `${field} must be a whole number as a decimal string, such as "10".`);
  return Number(raw);
}

export class RateLeases {
  private readonly clock: Clock;

  constructor(private readonly deps: RateLeasesDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  /** LeaseRate: grants a new lease (leaseId '') or renews one; an unknown, expired or past-window lease is granted anew. */
  async lease(request: RateLeaseRequest): Promise<RateLeaseAnswer> {
    if (request.keyId === '') throw invalidArgument('key_id', 'key_id is required.');
    const dimension = request.dimension as RateDimension;
    if (!dimensions.includes(dimension)) throw invalidArgument('dimension', `dimension must be one of ${dimensions.join(', ')}.`);
    const used = count(request.used, 'used', true);
    // 0 only to keep a lease alive without growing it (a concurrency lease whose slots come back as requests end).
    const want = count(request.want, 'want', true);
    if (want === 0 && request.leaseId === '') throw invalidArgument('want', 'want must be more than 0 for a new lease.');
    const min = count(request.min, 'min', true);
    if (min > want) throw invalidArgument('min', 'min may not be more than want.');
    const now = this.clock();
    const windowed = dimension !== 'concurrency';
    const windowStart = windowed ? new Date(Math.floor(now.getTime() / minuteMs) * minuteMs) : null;
    const windowEnd = windowStart && new Date(windowStart.getTime() + minuteMs);
    return this.deps.db.transaction(async (trx): Promise<RateLeaseAnswer> => {
      const key = await lockKeyBudget(trx, request.keyId);
      const refusal = keyRefusal(key, now);
      if (refusal !== undefined || !key) return { reason: refusalReason(refusal ?? KeyRefusal.UNKNOWN) };
      const limit = { requests: key.requests_per_minute, tokens: key.tokens_per_minute, concurrency: key.max_concurrent }[dimension];
      const base: RateLeaseAnswer = {
        leaseId: '',
        granted: '0',
        reason: refusalReason(KeyRefusal.UNSPECIFIED),
        resetsAt: windowEnd ? timestampFromDate(windowEnd) : undefined,
      };
      // No limit, no lease: the data plane admits without one.
      if (limit === null) return base;
      const budgetId = key.budget_id;
      const lease = request.leaseId === '' ? undefined : await findLiveRateLease(trx, { id: request.leaseId, budgetId, dimension, windowStart, now });
      const others = await otherRateLeases(trx, { budgetId, dimension, windowStart, now, exceptLeaseId: lease?.id ?? '' });
      const hold = lease ? used : 0;
      const room = limit - others.held - hold;
      const headroom = room < min ? 0 : Math.max(min, Math.min(want, Math.floor(room / (others.leases + 1))));
      // requests and tokens: the window's end; concurrency: the TTL, and the row holds one TTL more.
      const deadline = windowEnd ?? new Date(now.getTime() + this.deps.leaseTtlMs);
      const holdsUntil = windowEnd ?? new Date(deadline.getTime() + this.deps.leaseTtlMs);
      const answer = (leaseId: string, granted: number): RateLeaseAnswer => ({
        ...base,
        leaseId,
        granted: String(granted),
        expiresAt: leaseId ? timestampFromDate(deadline) : undefined,
        limit: BigInt(limit),
        remaining: BigInt(Math.max(limit - others.held - granted, 0)),
      });
      if (lease) {
        const granted = hold + headroom;
        await renewRateLease(trx, { id: lease.id, holder: request.holder, granted, holdsUntil });
        return answer(lease.id, granted);
      }
      if (headroom === 0) return answer('', 0);
      const leaseId = newId('rte');
      await insertRateLease(trx, { id: leaseId, budgetId, dimension, windowStart, holder: request.holder, granted: headroom, holdsUntil });
      return answer(leaseId, headroom);
    });
  }

  /** ReleaseRateLease: what the lease did not use returns at once; an unknown or expired lease is a no-op. */
  async release(leaseId: string, used: string): Promise<void> {
    if (leaseId === '') throw invalidArgument('lease_id', 'lease_id is required.');
    await releaseRateLease(this.deps.db, leaseId, count(used, 'used', true), this.clock());
  }
}
