import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { KeyRefusal, type LeaseCapResponseSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import { holderMarginMs } from '@switchboard/runtime/lease-ttl';
import { formatMoney, Money } from '@switchboard/runtime/money';
import { refusalReason } from './authorization.js';
import { parseEstimate } from './key-input.js';
import { monthOf } from './months.js';
import { type Period, periodEnd } from './periods.js';
import { type BudgetSubject, budgetLimits, periodCommitments } from './store/budget-spend.js';
import {
  findLiveLease,
  insertLease,
  type KeyBudgetRow,
  type LeaseKind,
  lockKeyBudget,
  lockWorkspaceBudget,
  otherLeases,
  releaseLease,
  renewLease,
  workspaceLeasePrefix,
} from './store/cap-leases.js';

/**
 * Budget leases (docs/money-path.md#leases): a data plane replica is granted a slice of what is
 * left of a budget and spends from it without asking, renewing it in the background. A budget is
 * a key's (every period it has a limit for, its monthly cap included; rotated keys share one) or a
 * workspace's. Under the budget's lock, and for every change that could raise what is held, for
 * each limited period p:
 *   spend(p) + open reservations made in p + Σ unsettled part of the unexpired leases ≤ limit(p).
 * A grant or renewal of a lease holding `used` (settled or in flight) asks for `want` more and
 * accepts no less than `min`:
 *   hold     = the lease's unsettled part of `used` (0 for a new lease)
 *   room     = min over limited periods of (limit − spend − reservations − other leases − hold)
 *   headroom = 0 when room < min, else min(want, room ÷ (other leases holding room + 1)), at least min
 * so concurrent replicas share what is left fairly, down to one request each. The period that
 * leaves the least room is the answer's (the facts of a 402). The lease allows `used + headroom`
 * until half its TTL or the end of the earliest limited period, whichever comes first; a new lease
 * without headroom is not created. A lease not renewed by then stops counting half a TTL later: what
 * it did not spend returns (usage of requests in flight when its holder lost touch settles first,
 * also when they end in the next period: the lease counts against it meanwhile).
 * An unexpired lease counts against every period: it was granted within each one's current span.
 * A workspace lease lasts at most `workspaceLeaseMs` (1 s): a workspace's limits reach data planes
 * by no event, so a lowered limit binds every replica within a second (docs/api/keys.md#workspace-budgets).
 * Usage settles a lease (spend.ts): its cost moves from the lease to the spend in one transaction.
 */

export type LeaseAnswer = MessageInitShape<typeof LeaseCapResponseSchema>;

/** How long a replica may spend from a workspace lease before renewing it (see above). */
export const workspaceLeaseMs = 1000;

export interface CapLeasesDeps {
  db: Knex;
  /** LEASE_TTL: how long a lease holds room without a renewal. */
  leaseTtlMs: number;
  clock?: Clock;
}

export interface LeaseRequest {
  /** The key whose budget to lease; '' with workspaceId. */
  keyId: string;
  /** The workspace whose budget to lease, when keyId is ''. */
  workspaceId?: string;
  /** The lease to renew; '' for a new one. */
  leaseId: string;
  holder: string;
  usedUsd: string;
  wantUsd: string;
  minUsd: string;
}

/** A decimal of the request, '' meaning 0 where the field may be left out. */
const amount = (raw: string, field: string) => parseEstimate(raw === '' ? '0' : raw, field);

/** Why a key may not spend at all, or undefined. */
export function keyRefusal(key: Pick<KeyBudgetRow, 'status' | 'expires_at'> | undefined, now: Date): KeyRefusal | undefined {
  if (!key) return KeyRefusal.UNKNOWN;
  if (key.status === 'revoked') return KeyRefusal.REVOKED;
  if (key.expires_at !== null && key.expires_at.getTime() <= now.getTime()) return KeyRefusal.EXPIRED;
  return undefined;
}

export class CapLeases {
  private readonly clock: Clock;

  constructor(private readonly deps: CapLeasesDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  /** LeaseCap: grants a new lease (leaseId '') or renews one; an unknown or expired lease is granted anew. */
  async lease(request: LeaseRequest): Promise<LeaseAnswer> {
    const workspaceId = request.workspaceId ?? '';
    if (request.keyId === '' && workspaceId === '') throw invalidArgument('key_id', 'key_id or workspace_id is required.');
    const used = new Money(amount(request.usedUsd, 'used_usd'));
    const want = new Money(parseEstimate(request.wantUsd, 'want_usd'));
    if (!want.gt(0)) throw invalidArgument('want_usd', 'want_usd must be more than 0.');
    const min = new Money(amount(request.minUsd, 'min_usd'));
    if (min.gt(want)) throw invalidArgument('min_usd', 'min_usd may not be more than want_usd.');
    const now = this.clock();
    const kind: LeaseKind = request.keyId === '' ? 'workspace' : 'key';
    return this.deps.db.transaction(async (trx): Promise<LeaseAnswer> => {
      let subject: BudgetSubject;
      let cap: string | null = null;
      if (kind === 'key') {
        const key = await lockKeyBudget(trx, request.keyId);
        const refusal = keyRefusal(key, now);
        if (refusal !== undefined || !key) return { reason: refusalReason(refusal ?? KeyRefusal.UNKNOWN) };
        subject = { budgetId: key.budget_id, keyId: request.keyId };
        cap = key.cap;
      } else {
        await lockWorkspaceBudget(trx, workspaceId);
        subject = { workspaceId };
      }
      const subjectId = 'workspaceId' in subject ? subject.workspaceId : subject.budgetId;
      const scope = kind;
      const limits = await budgetLimits(trx, subject, cap);
      const unlimited: LeaseAnswer = { leaseId: '', grantedUsd: '0', scope, reason: refusalReason(KeyRefusal.UNSPECIFIED) };
      if (limits.length === 0) {
        // No limit, no lease: the data plane spends without one (and trusts this for a second only).
        const month = (await periodCommitments(trx, subject, ['month'], now, false)).get('month')!;
        return { ...unlimited, period: 'month', spendUsd: month.spend, resetsAt: timestampFromDate(periodEnd('month', now)!) };
      }
      const lease = request.leaseId === '' ? undefined : await findLiveLease(trx, kind, request.leaseId, subjectId, now);
      const committed = await periodCommitments(
        trx,
        subject,
        limits.map((limit) => limit.period),
        now,
        true,
      );
      const others = await otherLeases(trx, kind, subjectId, lease?.id ?? '', now);
      const hold = lease ? Money.max(used.minus(lease.settled_usd), 0) : new Money(0);
      // The binding period: the one leaving the least room (the first in period order on a tie).
      let binding: { period: Period; capUsd: string; spendUsd: string; room: Money } | undefined;
      for (const limit of limits) {
        const { spend, reserved } = committed.get(limit.period)!;
        const room = new Money(limit.amountUsd).minus(spend).minus(reserved).minus(others.leased).minus(hold);
        if (!binding || room.lt(binding.room)) binding = { period: limit.period, capUsd: limit.amountUsd, spendUsd: spend, room };
      }
      const { room } = binding!;
      const share = room.div(others.leases + 1).toDecimalPlaces(18, Money.ROUND_DOWN);
      const headroom = room.lt(min) ? new Money(0) : Money.max(min, Money.min(want, share));
      const resetsAt = periodEnd(binding!.period, now);
      const facts: LeaseAnswer = {
        ...unlimited,
        period: binding!.period,
        capUsd: binding!.capUsd,
        spendUsd: binding!.spendUsd,
        resetsAt: resetsAt ? timestampFromDate(resetsAt) : undefined,
      };
      const deadline = this.deadline(kind, now, limits);
      // The row holds for half a TTL past the holder's deadline (docs/money-path.md#leases).
      const holdsUntil = new Date(deadline.getTime() + holderMarginMs(this.deps.leaseTtlMs));
      const month = monthOf(now);
      if (lease) {
        const grantedUsd = formatMoney(used.plus(headroom));
        await renewLease(trx, kind, { id: lease.id, month, holder: request.holder, grantedUsd, holdsUntil });
        return { ...facts, leaseId: lease.id, grantedUsd, expiresAt: timestampFromDate(deadline) };
      }
      // What the holder used of a lease that is gone was counted by that lease: a new one starts at 0.
      if (headroom.isZero()) return facts;
      const leaseId = newId(kind === 'key' ? 'lse' : workspaceLeasePrefix);
      const grantedUsd = formatMoney(headroom);
      await insertLease(trx, kind, { id: leaseId, subjectId, month, holder: request.holder, grantedUsd, holdsUntil });
      return { ...facts, leaseId, grantedUsd, expiresAt: timestampFromDate(deadline) };
    });
  }

  /** ReleaseCapLease: what the lease did not use returns to the budget at once; an unknown or expired lease is a no-op. */
  async release(leaseId: string, usedUsd: string): Promise<void> {
    if (leaseId === '') throw invalidArgument('lease_id', 'lease_id is required.');
    await releaseLease(this.deps.db, leaseId, amount(usedUsd, 'used_usd'), this.clock());
  }

  /** Until when the holder may spend from the lease: half its TTL, cut at the end of the earliest limited period. */
  private deadline(kind: LeaseKind, now: Date, limits: Array<{ period: Period }>): Date {
    const holderTtl = this.deps.leaseTtlMs - holderMarginMs(this.deps.leaseTtlMs);
    const ttl = kind === 'workspace' ? Math.min(holderTtl, workspaceLeaseMs) : holderTtl;
    let deadline = now.getTime() + ttl;
    for (const { period } of limits) deadline = Math.min(deadline, periodEnd(period, now)?.getTime() ?? deadline);
    return new Date(deadline);
  }
}
