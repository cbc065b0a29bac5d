import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { LeaseBalanceResponseSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import { holderMarginMs } from '@switchboard/runtime/lease-ttl';
import { formatMoney, Money, parsePlainDecimal } from '@switchboard/runtime/money';
import type { Pricing } from '@switchboard/runtime/pricing';
import type { Accounts } from './accounts.js';
import { optionalId, requiredId } from './fields.js';
import { lockAccount } from './store/accounts.js';
import { findLiveLease, otherLeases, pruneLeases, releaseLease, upsertLease } from './store/balance-leases.js';

/**
 * Leases on a workspace's prepaid balance (docs/money-path.md#leases): a data plane replica
 * reserves each request against its lease instead of calling billing. Every grant runs under the
 * account's row lock and keeps balance − Σ outstanding(leases) ≥ 0, so however many replicas hold
 * leases, what they can spend is covered by the balance. Each of `n` holders gets at most a fair
 * share of what is left (room ÷ n), and never less than the one request it waits for.
 */

export interface BalanceLeasesDeps {
  db: Knex;
  pricing: Pricing;
  accounts: Accounts;
  /** LEASE_TTL: a lease not renewed within it stops holding anything. */
  leaseTtlMs: number;
}

export interface LeaseRequest {
  workspaceId: string;
  /** The lease to renew; empty for a new one. */
  leaseId: string;
  holder: string;
  usedUsd: string;
  wantUsd: string;
  minUsd: string;
}

export type LeaseAnswer = MessageInitShape<typeof LeaseBalanceResponseSchema>;

/** A proto3 string left empty is "0" (a new lease has used nothing). */
const amountOr0 = (raw: string, field: string) => new Money(parsePlainDecimal(raw === '' ? '0' : raw, field));

export class BalanceLeases {
  constructor(private readonly deps: BalanceLeasesDeps) {}

  async lease(request: LeaseRequest): Promise<LeaseAnswer> {
    const { db, pricing, accounts, leaseTtlMs } = this.deps;
    const workspaceId = requiredId(request.workspaceId, 'workspace_id');
    const leaseId = optionalId(request.leaseId, 'lease_id');
    const holder = requiredId(request.holder, 'holder');
    const used = amountOr0(request.usedUsd, 'used_usd');
    const want = new Money(parsePlainDecimal(request.wantUsd, 'want_usd'));
    const min = new Money(parsePlainDecimal(request.minUsd, 'min_usd'));
    if (want.isZero()) throw invalidArgument('want_usd', 'want_usd must be above 0.');
    if (min.greaterThan(want)) throw invalidArgument('min_usd', 'min_usd may not exceed want_usd.');

    await accounts.ensure(workspaceId);
    return db.transaction(async (trx) => {
      const account = await lockAccount(trx, workspaceId);
      if (!account) throw new Error(`billing account ${workspaceId} vanished`);
      // An unknown or expired lease is replaced by a new one: the old one holds nothing any more.
      const live = leaseId === undefined ? undefined : await findLiveLease(trx, leaseId, workspaceId);
      // A holder never used more than it was granted; claiming more must not hold more of the balance.
      const usedOfLease = live ? Money.min(used, live.granted_usd) : new Money(0);
      const hold = live ? Money.max(usedOfLease.minus(live.settled_usd), 0) : new Money(0);
      const others = await otherLeases(trx, workspaceId, live?.id ?? '');
      const room = new Money(account.balance_usd).minus(others.outstandingUsd).minus(hold);
      const share = room.div(others.holding + 1).toDecimalPlaces(18, Money.ROUND_DOWN);
      const headroom = room.lessThan(min) ? new Money(0) : Money.max(min, Money.min(want, share));
      const answer = { balanceUsd: account.balance_usd, planId: account.plan_id, pricingVersion: pricing.version };
      if (!live && headroom.isZero()) return { ...answer, leaseId: '', grantedUsd: '0' };
      const id = live?.id ?? newId('lse');
      const grantedUsd = formatMoney(usedOfLease.plus(headroom));
      // The row holds for LEASE_TTL, the holder's deadline is half of it (docs/money-path.md#leases):
      // a lease not renewed returns at its TTL, and usage of requests still in flight when a holder
      // lost touch has the other half to settle before its room is granted again.
      const holdsUntil = await upsertLease(trx, { id, workspaceId, holder, grantedUsd, ttlMs: leaseTtlMs });
      return { ...answer, leaseId: id, grantedUsd, expiresAt: timestampFromDate(new Date(holdsUntil.getTime() - holderMarginMs(leaseTtlMs))) };
    });
  }

  /** Gives back what the lease did not use; an unknown or expired lease is left alone. */
  async release(leaseId: string, usedUsd: string): Promise<void> {
    await releaseLease(this.deps.db, requiredId(leaseId, 'lease_id'), formatMoney(amountOr0(usedUsd, 'used_usd')));
  }

  /** Deletes leases expired more than a day ago; returns how many. */
  prune(): Promise<number> {
    return pruneLeases(this.deps.db);
  }
}
