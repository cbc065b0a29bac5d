import type { Knex } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import type { Pricing } from '@switchboard/runtime/pricing';
import type { Db } from '@switchboard/runtime/sql';
import { ensureAccounts, findAccount } from './store/accounts.js';

/**
 * Billing accounts: one per workspace, created on first touch with the opening credit
 * (docs/api/billing.md#free-credit-and-the-sandbox: 0, unless the sandbox runs with
 * SANDBOX_OPENING_CREDIT_USD, with its own ledger entry), personal workspaces and organizations
 * alike. The insert is idempotent, so the credit is given once whichever call comes first. The
 * free credit is not this: it comes per user, on email verification (free-credit.ts).
 */
export interface AccountsDeps {
  db: Knex;
  pricing: Pricing;
  openingCreditUsd: string;
}

/** The ledger reference of an opening credit. */
export const openingCreditReference = 'opening credit (sandbox)';

export class Accounts {
  /** Workspaces known to have an account: no insert attempt per call. Bounded. */
  private readonly known = new Set<string>();
  private readonly plans = new Map<string, string>();

  constructor(private readonly deps: AccountsDeps) {}

  async ensure(workspaceId: string): Promise<void> {
    if (this.known.has(workspaceId)) return;
    await this.open(this.deps.db, [workspaceId]);
    if (this.known.size >= 100_000) this.known.clear();
    this.known.add(workspaceId);
  }

  /** Opens the accounts of `workspaceIds` that have none, inside `trx` (a batch's). */
  async ensureIn(trx: Knex.Transaction, workspaceIds: string[]): Promise<void> {
    await this.open(trx, workspaceIds);
  }

  private async open(db: Db, workspaceIds: string[]): Promise<void> {
    await ensureAccounts(
      db,
      { workspaceIds, entryIds: workspaceIds.map(() => newId('led')) },
      { creditUsd: this.deps.openingCreditUsd, reference: openingCreditReference },
      this.deps.pricing.defaultPlan,
    );
  }

  /**
   * The plan of the workspace, read once per process (no call changes a plan; a plan change would
   * have to drop this entry).
   */
  async planOf(workspaceId: string): Promise<string> {
    const known = this.plans.get(workspaceId);
    if (known) return known;
    const { planId } = await this.get(workspaceId);
    if (this.plans.size >= 100_000) this.plans.clear();
    this.plans.set(workspaceId, planId);
    return planId;
  }

  /** The account, created first when needed. */
  async get(workspaceId: string): Promise<{ balanceUsd: string; planId: string; updatedAt: Date }> {
    await this.ensure(workspaceId);
    const row = await findAccount(this.deps.db, workspaceId);
    if (!row) throw new Error(`billing account ${workspaceId} vanished`);
    return { balanceUsd: row.balance_usd, planId: row.plan_id, updatedAt: row.updated_at };
  }
}
