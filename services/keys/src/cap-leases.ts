import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { KeyRefusal, type LeaseCapResponseSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import { formatMoney, Money } from '@switchboard/runtime/money';
import { refusalReason } from './authorization.js';
import { parseEstimate } from './key-input.js';
import { monthEnd, monthOf } from './months.js';
import { findLiveLease, insertLease, releaseLease, renewLease } from './store/cap-leases.js';
import { lockKeyCap } from './store/keys.js';
import { capCommitments } from './store/spend.js';

/**
 * Leases on a key's monthly cap (docs/money-path.md#leases): a data plane replica is granted a
 * slice of what is left of the cap and spends from it without asking, renewing it in the
 * background. Under the key's row lock, and for every change that could raise what is held:
 *   month spend + Σ unsettled part of the unexpired leases + open reservations ≤ cap.
 * A grant or renewal of a lease holding `used` (settled or in flight) asks for `want` more and
 * accepts no less than `min`:
 *   hold     = the lease's unsettled part of `used` (0 for a new lease)
 *   room     = cap − spend − reservations − other leases − hold
 *   headroom = 0 when room < min, else min(want, room ÷ (other leases holding room + 1)), at least min
 * so concurrent replicas share what is left fairly, down to one request each. The lease then
 * allows `used + headroom` until the TTL (or the month) ends; a new lease without headroom is not
 * created. A lease not renewed within its TTL stops counting: what it did not spend returns.
 * Usage settles a lease (spend.ts): its cost moves from the lease to the spend in one transaction.
 */

export type LeaseAnswer = MessageInitShape<typeof LeaseCapResponseSchema>;

export interface CapLeasesDeps {
  db: Knex;
  /** LEASE_TTL: how long a lease holds room without a renewal. */
  leaseTtlMs: number;
  clock?: Clock;
}

export interface LeaseRequest {
  keyId: string;
  /** The lease to renew; '' for a new one. */
  leaseId: string;
  holder: string;
  usedUsd: string;
  wantUsd: string;
  minUsd: string;
}

/** A decimal of the request, '' meaning 0 where the field may be left out. */
const amount = (raw: string, field: string) => parseEstimate(raw === '' ? '0' : raw, field);

export class CapLeases {
  private readonly clock: Clock;

  constructor(private readonly deps: CapLeasesDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  /** LeaseCap: grants a new lease (leaseId '') or renews one; an unknown or expired lease is granted anew. */
  async lease(request: LeaseRequest): Promise<LeaseAnswer> {
    if (request.keyId === '') throw invalidArgument('key_id', 'key_id is required.');
    const used = new Money(amount(request.usedUsd, 'used_usd'));
    const want = new Money(parseEstimate(request.wantUsd, 'want_usd'));
    if (!want.gt(0)) throw invalidArgument('want_usd', 'want_usd must be more than 0.');
    const min = new Money(amount(request.minUsd, 'min_usd'));
    if (min.gt(want)) throw invalidArgument('min_usd', 'min_usd may not be more than want_usd.');
    const now = this.clock();
    const month = monthOf(now);
    const resetsAt = timestampFromDate(monthEnd(now));
    // The row holds for a second TTL past the holder's deadline (docs/money-path.md#leases): usage of
    // requests still in flight when a holder lost touch is settled before its room is granted again.
    const ttlSeconds = (2 * this.deps.leaseTtlMs) / 1000;
    const deadline = (holdsUntil: Date) => timestampFromDate(new Date(holdsUntil.getTime() - this.deps.leaseTtlMs));
    return this.deps.db.transaction(async (trx): Promise<LeaseAnswer> => {
      const key = await lockKeyCap(trx, request.keyId);
      if (key?.status !== 'active') return { reason: refusalReason(key?.status === 'revoked' ? KeyRefusal.REVOKED : KeyRefusal.UNKNOWN) };
      const lease = request.leaseId === '' ? undefined : await findLiveLease(trx, request.leaseId, request.keyId, month);
      const committed = await capCommitments(trx, request.keyId, month, lease?.id ?? '');
      const facts = { spendUsd: formatMoney(committed.spend), resetsAt, reason: refusalReason(KeyRefusal.UNSPECIFIED) };
      // A key without a cap needs no lease: the data plane spends without one.
      if (key.cap === null) return { ...facts, leaseId: '', grantedUsd: '0' };
      const hold = lease ? Money.max(used.minus(lease.settled_usd), 0) : new Money(0);
      const room = new Money(key.cap).minus(committed.spend).minus(committed.reserved).minus(committed.leased).minus(hold);
      const share = room.div(committed.leases + 1).toDecimalPlaces(18, Money.ROUND_DOWN);
      const headroom = room.lt(min) ? new Money(0) : Money.max(min, Money.min(want, share));
      const capFacts = { ...facts, capUsd: key.cap };
      if (lease) {
        const grantedUsd = formatMoney(used.plus(headroom));
        const expiresAt = await renewLease(trx, { id: lease.id, month, holder: request.holder, grantedUsd, ttlSeconds });
        return { ...capFacts, leaseId: lease.id, grantedUsd, expiresAt: deadline(expiresAt) };
      }
      // What the holder used of a lease that is gone was counted by that lease: a new one starts at 0.
      if (headroom.isZero()) return { ...capFacts, leaseId: '', grantedUsd: '0' };
      const leaseId = newId('lse');
      const grantedUsd = formatMoney(headroom);
      const expiresAt = await insertLease(trx, { id: leaseId, keyId: request.keyId, month, holder: request.holder, grantedUsd, ttlSeconds });
      return { ...capFacts, leaseId, grantedUsd, expiresAt: deadline(expiresAt) };
    });
  }

  /** ReleaseCapLease: what the lease did not use returns to the cap at once; an unknown or expired lease is a no-op. */
  async release(leaseId: string, usedUsd: string): Promise<void> {
    if (leaseId === '') throw invalidArgument('lease_id', 'lease_id is required.');
    await releaseLease(this.deps.db, leaseId, amount(usedUsd, 'used_usd'));
  }
}
