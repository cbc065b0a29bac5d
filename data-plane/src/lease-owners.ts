import type { Timestamp } from '@bufbuild/protobuf/wkt';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { Client } from '@connectrpc/connect';
import type { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import type { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { Money } from '@switchboard/runtime/money';
import type { LeaseOwner } from './budget-leases.js';

/**
 * The owners of the budgets a request spends from, behind their lease RPCs
 * (docs/money-path.md#leases): the keys service for a key's and a workspace's periodic budgets
 * and a key's rate limits, billing for the workspace's prepaid balance.
 */

/** What a 402 spend_cap_exceeded reports (docs/api/keys.md#periodic-budgets): the budget with the least room. */
export interface CapFacts {
  capUsd?: string;
  spendUsd: string;
  resetsAt?: Timestamp;
  /** key or workspace. */
  scope?: string;
  /** day, week, month or total. */
  period?: string;
}

/** Where a rate limit stands at its owner (docs/api/front-door.md#rate-limits): a 429's metadata and the x-ratelimit-* headers. */
export interface RateFacts {
  /** The limit; undefined when the key has none (anymore). */
  limit?: number;
  /** What was left of the limit in the window beyond every lease, at the owner's last answer. */
  remaining: number;
  /** When the window ends (requests, tokens); undefined for concurrency. */
  resetsAt?: Date;
}

/** What a 402 insufficient_balance reports, and what pricing the workspace's usage needs. */
export interface BalanceFacts {
  balanceUsd: string;
  planId: string;
  pricingVersion: string;
}

/** How long "no limit" is trusted (a key's or workspace's budget, a rate limit): a new limit is seen well within it. */
const noCapTrustMs = 1000;

/**
 * The keys service's budgets of a key (`of: 'key'`, subject a key id: every period it has a
 * limit for) or of a workspace (`of: 'workspace'`, subject a workspace id).
 */
export function capOwner(keys: Client<typeof KeyService>, holder: string, timeoutMs: number, of: 'key' | 'workspace' = 'key'): LeaseOwner<CapFacts> {
  return {
    async lease(subject, request) {
      const answer = await keys.leaseCap({ ...(of === 'key' ? { keyId: subject } : { workspaceId: subject }), holder, ...request }, { timeoutMs });
      const facts = {
        capUsd: answer.capUsd,
        spendUsd: answer.spendUsd || '0',
        resetsAt: answer.resetsAt,
        scope: answer.scope || of,
        period: answer.period || 'month',
      };
      if (answer.reason) return { leaseId: '', grantedUsd: '0', expiresAt: new Date(), refusal: answer.reason, facts };
      if (answer.capUsd === undefined) return { leaseId: '', grantedUsd: '0', expiresAt: new Date(Date.now() + noCapTrustMs), unlimited: true, facts };
      return { leaseId: answer.leaseId, grantedUsd: answer.grantedUsd, expiresAt: expiry(answer.expiresAt), facts };
    },
    async release(leaseId, usedUsd) {
      await keys.releaseCapLease({ leaseId, usedUsd }, { timeoutMs });
    },
  };
}

/**
 * The keys service's rate limit `dimension` of a key (subject a key id). The amounts are whole
 * numbers: what BudgetLeases asks in fractions (a keep-alive's least amount, a typical request's
 * share) is rounded up.
 */
export function rateOwner(
  keys: Client<typeof KeyService>,
  holder: string,
  timeoutMs: number,
  dimension: 'requests' | 'tokens' | 'concurrency',
): LeaseOwner<RateFacts> {
  const whole = (value: string) => new Money(value).ceil().toFixed();
  return {
    async lease(keyId, request) {
      const answer = await keys.leaseRate(
        { keyId, dimension, holder, leaseId: request.leaseId, used: whole(request.usedUsd), want: whole(request.wantUsd), min: whole(request.minUsd) },
        { timeoutMs },
      );
      const facts: RateFacts = {
        limit: answer.limit === undefined ? undefined : Number(answer.limit),
        remaining: Number(answer.remaining),
        resetsAt: answer.resetsAt ? timestampDate(answer.resetsAt) : undefined,
      };
      if (answer.reason) return { leaseId: '', grantedUsd: '0', expiresAt: new Date(), refusal: answer.reason, facts };
      if (answer.limit === undefined) return { leaseId: '', grantedUsd: '0', expiresAt: new Date(Date.now() + noCapTrustMs), unlimited: true, facts };
      return { leaseId: answer.leaseId, grantedUsd: answer.granted || '0', expiresAt: expiry(answer.expiresAt), facts };
    },
    async release(leaseId, used) {
      await keys.releaseRateLease({ leaseId, used: whole(used) }, { timeoutMs });
    },
  };
}

export function balanceOwner(billing: Client<typeof UsageService>, holder: string, timeoutMs: number): LeaseOwner<BalanceFacts> {
  return {
    async lease(workspaceId, request) {
      const answer = await billing.leaseBalance({ workspaceId, holder, ...request }, { timeoutMs });
      return {
        leaseId: answer.leaseId,
        grantedUsd: answer.grantedUsd,
        expiresAt: expiry(answer.expiresAt),
        facts: { balanceUsd: answer.balanceUsd, planId: answer.planId, pricingVersion: answer.pricingVersion },
      };
    },
    async release(leaseId, usedUsd) {
      await billing.releaseBalanceLease({ leaseId, usedUsd }, { timeoutMs });
    },
  };
}

/** A lease without an expiry is worth nothing: it is treated as expired. */
function expiry(at: Timestamp | undefined): Date {
  return at ? timestampDate(at) : new Date(0);
}
