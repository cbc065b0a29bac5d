import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { SpendLimitStatusSchema, WorkspaceSpendLimitsSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { type AuditTrail, callerAuditRecord } from '@switchboard/runtime/audit';
import type { WorkspaceCaller } from '@switchboard/runtime/caller';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { parseSpendLimits, type RawSpendLimit } from './budgets.js';
import { type BudgetStatus, budgetStatuses, setWorkspaceSpendLimits } from './store/budget-spend.js';
import { lockWorkspaceBudget } from './store/cap-leases.js';

/**
 * The workspace's periodic budgets (docs/api/keys.md#workspace-budgets): GET and PUT
 * /v1/billing/spend-limits, for the workspace of the request (the RPCs' access rules decide who
 * may read and change them). A change needs no event: a data plane trusts a "no limits" answer
 * and a workspace lease for one second at most (cap-leases.ts), so every replica applies a new
 * limit within a second, and AuthenticateKey's cached standing is as fresh.
 */

export type SpendLimitStatusInit = MessageInitShape<typeof SpendLimitStatusSchema>;
export type WorkspaceSpendLimitsInit = MessageInitShape<typeof WorkspaceSpendLimitsSchema>;

/** One budget as the API shows it (the key record uses it too). */
export function spendLimitStatus(status: BudgetStatus): SpendLimitStatusInit {
  return {
    period: status.period,
    amountUsd: status.amountUsd,
    spendUsd: status.spendUsd,
    remainingUsd: status.remainingUsd,
    resetsAt: status.resetsAt ? timestampFromDate(status.resetsAt) : undefined,
  };
}

export interface SpendLimitsDeps {
  db: Knex;
  /** Where a change of the limits is recorded (`spend_limits.updated`, target the workspace). */
  audit: AuditTrail;
  clock?: Clock;
}

export class SpendLimits {
  private readonly clock: Clock;

  constructor(private readonly deps: SpendLimitsDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  async get(caller: WorkspaceCaller): Promise<WorkspaceSpendLimitsInit> {
    return this.statuses(this.deps.db, caller.workspaceId);
  }

  /** Replaces the workspace's limits (an empty list removes them all) and answers where each stands. */
  async update(caller: WorkspaceCaller, raw: readonly RawSpendLimit[]): Promise<WorkspaceSpendLimitsInit> {
    const limits = parseSpendLimits(raw);
    return this.deps.db.transaction(async (trx) => {
      // After every lease decision under way: the next one sees the new limits.
      await lockWorkspaceBudget(trx, caller.workspaceId);
      await setWorkspaceSpendLimits(trx, caller.workspaceId, limits);
      await this.deps.audit.record(
        trx,
        callerAuditRecord(
          caller,
          'spend_limits.updated',
          { type: 'workspace', id: caller.workspaceId },
          { metadata: { periods: limits.map((limit) => limit.period).join(',') } },
        ),
      );
      return this.statuses(trx, caller.workspaceId);
    });
  }

  private async statuses(db: Knex, workspaceId: string): Promise<WorkspaceSpendLimitsInit> {
    const statuses = await budgetStatuses(db, { workspaceId }, null, this.clock());
    return { spendLimits: statuses.map(spendLimitStatus) };
  }
}
