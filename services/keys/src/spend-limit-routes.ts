import type { ConnectRouter, ServiceImpl } from '@connectrpc/connect';
import { type KeyService, SpendLimitService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import type { AuditTrail } from '@switchboard/runtime/audit';
import { workspaceCaller } from '@switchboard/runtime/caller';
import type { Knex } from '@switchboard/runtime/db';
import type { KeysConfig } from './config.js';
import { RateLeases } from './rate-leases.js';
import { SpendLimits } from './spend-limits.js';

/**
 * The RPCs of budgets and rate limits (docs/api/keys.md#workspace-budgets,
 * docs/money-path.md#rate-limit-leases): SpendLimitService, and KeyService's LeaseRate and
 * ReleaseRateLease for server.ts to include. Translation only; the work is in spend-limits.ts and
 * rate-leases.ts.
 */

export interface BudgetHandlers {
  spendLimits: SpendLimits;
  rateLeases: RateLeases;
}

export function prepareBudgets(db: Knex, audit: AuditTrail, config: Pick<KeysConfig, 'leaseTtlMs'>): BudgetHandlers {
  return { spendLimits: new SpendLimits({ db, audit }), rateLeases: new RateLeases({ db, leaseTtlMs: config.leaseTtlMs }) };
}

export function registerSpendLimitRoutes(router: ConnectRouter, handlers: Pick<BudgetHandlers, 'spendLimits'>): void {
  const service: ServiceImpl<typeof SpendLimitService> = {
    async getWorkspaceSpendLimits(_req, ctx) {
      return handlers.spendLimits.get(workspaceCaller(ctx));
    },
    async updateWorkspaceSpendLimits(req, ctx) {
      return handlers.spendLimits.update(workspaceCaller(ctx), req.spendLimits);
    },
  };
  router.service(SpendLimitService, service);
}

/** KeyService's rate lease RPCs (data plane only: their access rule). */
export function rateLeaseHandlers(rateLeases: RateLeases): Pick<ServiceImpl<typeof KeyService>, 'leaseRate' | 'releaseRateLease'> {
  return {
    async leaseRate(req) {
      return rateLeases.lease({
        keyId: req.keyId,
        dimension: req.dimension,
        leaseId: req.leaseId,
        holder: req.holder,
        used: req.used,
        want: req.want,
        min: req.min,
      });
    },
    async releaseRateLease(req) {
      await rateLeases.release(req.leaseId, req.used);
      return {};
    },
  };
}
