import type { Knex } from '@switchboard/runtime/db';
import type { Period } from '../periods.js';

/** One budget with where it stands in its current period (docs/api/keys.md#periodic-budgets). */
export interface BudgetStatus {
  period: Period;
  amountUsd: string;
  spendUsd: string;
  remainingUsd: string;
  /** null for total. */
  resetsAt: Date | null;
}

/** The budgets of a key (its budget) or a workspace, each with the spend of its current period. */
export async function budgetStatuses(
  _db: Knex,
  _subject: { budgetId: string; keyId: string } | { workspaceId: string },
  _monthlyCapUsd: string | null,
  _now: Date,
): Promise<BudgetStatus[]> {
  return []; // MERGE: B2 builds this
}
