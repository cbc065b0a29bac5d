import type { Knex } from '@switchboard/runtime/db';
import { formatMoney, Money } from '@switchboard/runtime/money';
import type { Db } from '@switchboard/runtime/sql';
import type { SpendLimitInput } from '../budgets.js';
import { type Period, periodEnd, periodStart, periods } from '../periods.js';
import { findSpendLimits, replaceSpendLimits } from './spend-limits.js';

// Spend per budget and period (migrations/007_budgets.ts): a key's budget (its budget id: rotated
// keys share it) has day, week and total here and its month in key_monthly_spend; a workspace has
// all four here.

/** One budget with where it stands in its current period (docs/api/keys.md#periodic-budgets). */
export interface BudgetStatus {
  period: Period;
  amountUsd: string;
  spendUsd: string;
  remainingUsd: string;
  /** null for total. */
  resetsAt: Date | null;
}

/** Whose budgets: a key's (its limits are the key's, its spend the budget's) or a workspace's. */
export type BudgetSubject = { budgetId: string; keyId: string } | { workspaceId: string };

/** A subject's limits, in period order: a key's rows plus its monthly cap, or a workspace's rows. */
export async function budgetLimits(db: Db, subject: BudgetSubject, monthlyCapUsd: string | null): Promise<SpendLimitInput[]> {
  if ('workspaceId' in subject) return order((await findSpendLimits(db, subject.workspaceId)).map(toLimit));
  const rows = (await findSpendLimits(db, subject.keyId)).filter((row) => row.period !== 'month').map(toLimit);
  return order(monthlyCapUsd === null ? rows : [...rows, { period: 'month', amountUsd: monthlyCapUsd }]);
}

const toLimit = (row: { period: Period; amount_usd: string }): SpendLimitInput => ({ period: row.period, amountUsd: row.amount_usd });
const order = (limits: SpendLimitInput[]) => limits.sort((a, b) => periods.indexOf(a.period) - periods.indexOf(b.period));

/** The budgets of a key (its budget) or a workspace, each with the spend of its current period. */
export async function budgetStatuses(db: Knex, subject: BudgetSubject, monthlyCapUsd: string | null, now: Date): Promise<BudgetStatus[]> {
  const limits = await budgetLimits(db, subject, monthlyCapUsd);
  if (limits.length === 0) return [];
  const spends = await periodSpends(
    db,
    subject,
    limits.map((limit) => limit.period),
    now,
  );
  return limits.map((limit) => {
    const spendUsd = spends.get(limit.period) ?? '0';
    return {
      period: limit.period,
      amountUsd: limit.amountUsd,
      spendUsd,
      remainingUsd: formatMoney(Money.max(new Money(limit.amountUsd).minus(spendUsd), 0)),
      resetsAt: periodEnd(limit.period, now),
    };
  });
}

/** The settled spend of the periods of `now` named (a key's month is in key_monthly_spend). */
export async function periodSpends(db: Db, subject: BudgetSubject, of: Period[], now: Date): Promise<Map<Period, string>> {
  const committed = await periodCommitments(db, subject, of, now, false);
  return new Map([...committed].map(([period, { spend }]) => [period, spend]));
}

/**
 * Per period of `now` named: the settled spend, and for a key's budget with `withReservations`
 * every open AuthorizeKey reservation of its keys. A reservation counts against every period,
 * whenever it was made, as a lease does: one made at 23:59 may be settled after midnight, into the
 * new day. One statement, so spend and reservations come from one snapshot (a usage batch settles
 * a reservation as it adds the spend).
 */
export async function periodCommitments(
  db: Db,
  subject: BudgetSubject,
  of: Period[],
  now: Date,
  withReservations: boolean,
): Promise<Map<Period, { spend: string; reserved: string }>> {
  const isKey = !('workspaceId' in subject);
  const id = isKey ? subject.budgetId : subject.workspaceId;
  const { rows } = await db.raw<{ rows: Array<{ period: Period; spend: string; reserved: string }> }>(
    `SELECT p.period,
            COALESCE(CASE WHEN p.period = 'month' AND CAST(:isKey AS boolean)
                          THEN (SELECT spend_usd FROM key_monthly_spend WHERE key_id = :id AND month = p.start)
                          ELSE (SELECT spend_usd FROM budget_spend WHERE subject = :id AND period = p.period AND period_start = p.start) END, 0)::text AS spend,
            CASE WHEN CAST(:reservations AS boolean)
                 THEN COALESCE((SELECT sum(r.amount_usd) FROM reservations r
                                 WHERE r.key_id IN (SELECT k.id FROM api_keys k WHERE k.id = :id OR k.budget_id = :id)
                                   AND r.settled_at IS NULL AND r.expires_at > :now), 0)
                 ELSE 0 END::text AS reserved
       FROM unnest(CAST(:periods AS text[]), CAST(:starts AS date[])) AS p (period, start)`,
    { isKey, id, reservations: isKey && withReservations, now, periods: of, starts: of.map((period) => periodStart(period, now)) },
  );
  return new Map(rows.map((row) => [row.period, { spend: formatMoney(row.spend), reserved: formatMoney(row.reserved) }]));
}

/**
 * Replaces a key's periodic budgets: its day, week and total rows, and its month as
 * api_keys.monthly_spend_cap_usd (the one source of the month's limit). Either change moves the
 * key's state version (004's trigger on api_keys, 006's on spend_limits), so data planes give back
 * the leases granted under the old limits (docs/money-path.md#leases). Called under the key's row lock.
 */
export async function setKeySpendLimits(trx: Knex.Transaction, keyId: string, limits: SpendLimitInput[]): Promise<void> {
  await replaceSpendLimits(
    trx,
    keyId,
    limits.filter((limit) => limit.period !== 'month'),
  );
  const month = limits.find((limit) => limit.period === 'month');
  await trx('api_keys')
    .where({ id: keyId })
    .update({
      monthly_spend_cap_usd: month?.amountUsd ?? null,
      updated_at: trx.fn.now(),
    });
}

/** Replaces a workspace's periodic budgets (all four periods are rows). */
export async function setWorkspaceSpendLimits(trx: Knex.Transaction, workspaceId: string, limits: SpendLimitInput[]): Promise<void> {
  await replaceSpendLimits(trx, workspaceId, limits);
}

/**
 * Adds costs to the spend of periods, in one statement; returns the new totals. `costs` holds one
 * row per subject, period and start (a batch's costs summed): one statement may not update a row twice.
 */
export async function addBudgetSpends(
  trx: Knex.Transaction,
  costs: Array<{ subject: string; period: Period; periodStart: string; costUsd: string; count: number }>,
): Promise<Array<{ subject: string; period: Period; period_start: string; spend_usd: string }>> {
  if (costs.length === 0) return [];
  // In key order: two batches sharing a workspace's rows lock them in the same order (no deadlock).
  const sorted = [...costs].sort((a, b) => compare(a.subject, b.subject) || compare(a.period, b.period) || compare(a.periodStart, b.periodStart));
  const { rows } = await trx.raw<{ rows: Array<{ subject: string; period: Period; period_start: string; spend_usd: string }> }>(
    `INSERT INTO budget_spend AS s (subject, period, period_start, spend_usd, usage_count)
     SELECT * FROM unnest(?::text[], ?::text[], ?::date[], ?::numeric[], ?::bigint[])
     ON CONFLICT (subject, period, period_start) DO UPDATE
       SET spend_usd = s.spend_usd + EXCLUDED.spend_usd, usage_count = s.usage_count + EXCLUDED.usage_count, updated_at = now()
     RETURNING subject, period, to_char(period_start, 'YYYY-MM-DD') AS period_start, spend_usd::text`,
    [sorted.map((c) => c.subject), sorted.map((c) => c.period), sorted.map((c) => c.periodStart), sorted.map((c) => c.costUsd), sorted.map((c) => c.count)],
  );
  return rows;
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
