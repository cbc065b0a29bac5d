import type { Timestamp } from '@bufbuild/protobuf/wkt';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { Client } from '@connectrpc/connect';
import type { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import type { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import type { LeaseOwner } from './budget-leases.js';

/**
 * The owners of the budgets a request spends from, behind their lease RPCs
 * (docs/money-path.md#leases): the keys service for a key's monthly cap, billing for the
 * workspace's prepaid balance.
 */

/** What a 402 spend_cap_exceeded reports (docs/api/keys.md#monthly-spend). */
export interface CapFacts {
  capUsd?: string;
  spendUsd: string;
  resetsAt?: Timestamp;
}

/** What a 402 insufficient_balance reports, and what pricing the workspace's usage needs. */
export interface BalanceFacts {
  balanceUsd: string;
  planId: string;
  pricingVersion: string;
}

/** How long "this key has no cap" is trusted: the key replica sees a new cap well within it. */
const noCapTrustMs = 1000;

export function capOwner(keys: Client<typeof KeyService>, holder: string, timeoutMs: number): LeaseOwner<CapFacts> {
  return {
    async lease(keyId, request) {
      const answer = await keys.leaseCap({ keyId, holder, ...request }, { timeoutMs });
      const facts = { capUsd: answer.capUsd, spendUsd: answer.spendUsd || '0', resetsAt: answer.resetsAt };
      if (answer.reason) return { leaseId: '', grantedUsd: '0', expiresAt: new Date(), refusal: answer.reason, facts };
      if (answer.capUsd === undefined) return { leaseId: '', grantedUsd: '0', expiresAt: new Date(Date.now() + noCapTrustMs), unlimited: true, facts };
      return { leaseId: answer.leaseId, grantedUsd: answer.grantedUsd, expiresAt: expiry(answer.expiresAt), facts };
    },
    async release(leaseId, usedUsd) {
      await keys.releaseCapLease({ leaseId, usedUsd }, { timeoutMs });
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
