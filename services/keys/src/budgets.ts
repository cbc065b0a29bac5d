import type { Value } from '@bufbuild/protobuf/wkt';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument } from '@switchboard/runtime/errors';
import { formatMoney, Money } from '@switchboard/runtime/money';
import { parseSpendCap } from './key-input.js';
import { isPeriod, type Period, periodEnd, periods } from './periods.js';
import { type BudgetStatus, budgetLimits, periodCommitments } from './store/budget-spend.js';
import { otherLeases } from './store/cap-leases.js';

/**
 * Periodic budgets (docs/api/keys.md#periodic-budgets): limits per UTC day, week (from Monday),
 * calendar month and total, for a key (its budget: rotated keys share one) and for the workspace.
 * The key's month limit is its monthly_spend_cap_usd; every other limit is a spend_limits row.
 */

/** One limit as given, checked. */
export interface SpendLimitInput {
  period: Period;
  /** A non-negative plain decimal string, kept as given. */
  amountUsd: string;
}

/** What a request carries for one limit (SpendLimit of keys.proto): `amount_usd` is a JSON value, so a number can be refused. */
export interface RawSpendLimit {
  period: string;
  amountUsd?: Value;
}

/**
 * The list of a PUT (key or workspace): at most one limit per period, so at most 4; each
 * `amount_usd` a plain decimal string under the cap's rule. An error names the element and field,
 * e.g. `spend_limits[1].amount_usd`. Sorted by period (day, week, month, total).
 */
export function parseSpendLimits(raw: readonly RawSpendLimit[], field = 'spend_limits'): SpendLimitInput[] {
  if (raw.length > periods.length) throw invalidArgument(field, `${field} may hold at most ${periods.length} limits, one per period.`);
  const seen = new Set<Period>();
  const limits = raw.map((limit, i): SpendLimitInput => {
    const at = `${field}[${i}]`;
    const period = limit.period.trim();
    if (!isPeriod(period)) throw invalidArgument(`${at}.period`, `${at}.period must be one of ${periods.join(', ')}.`);
    if (seen.has(period)) throw invalidArgument(`${at}.period`, `${field} may hold one limit per period; ${period} is there twice.`);
    seen.add(period);
    const amount = limit.amountUsd?.kind;
    if (amount?.case !== 'stringValue') throw invalidArgument(`${at}.amount_usd`, `${at}.amount_usd must be a decimal string such as "5.00".`);
    return { period, amountUsd: parseSpendCap(amount.value, `${at}.amount_usd`) };
  });
  return limits.sort((a, b) => periods.indexOf(a.period) - periods.indexOf(b.period));
}

/** A limit the spend of its period has reached: the facts of a 402 spend_cap_exceeded. */
export interface BudgetReached {
  scope: 'key' | 'workspace';
  period: Period;
  capUsd: string;
  spendUsd: string;
  /** null for total. */
  resetsAt: Date | null;
}

/** The first of `statuses` whose spend reached its limit (a limit of 0 is reached at once). */
export function firstReached(scope: BudgetReached['scope'], statuses: BudgetStatus[]): BudgetReached | undefined {
  const reached = statuses.find((status) => new Money(status.spendUsd).gte(status.amountUsd));
  return reached && { scope, period: reached.period, capUsd: reached.amountUsd, spendUsd: reached.spendUsd, resetsAt: reached.resetsAt };
}

/**
 * For an AuthorizeKey reservation of `amountUsd` (docs/api/keys.md#reservations): the first limit
 * of the key's budget it would pass, counting each period's settled spend, the open reservations
 * made in it and the unsettled part of every unexpired lease of the budget (`spendUsd` is that
 * sum); undefined when it fits every limit. Call it under lockKeyBudget (store/cap-leases.ts),
 * the lock of every lease decision of the budget, and insert the reservation in that transaction.
 */
export async function budgetPassedBy(
  trx: Knex.Transaction,
  key: { keyId: string; budgetId: string; monthlyCapUsd: string | null },
  amountUsd: string,
  now: Date,
): Promise<BudgetReached | undefined> {
  const limits = await budgetLimits(trx, { keyId: key.keyId, budgetId: key.budgetId }, key.monthlyCapUsd);
  if (limits.length === 0) return undefined;
  const subject = { keyId: key.keyId, budgetId: key.budgetId };
  const committed = await periodCommitments(
    trx,
    subject,
    limits.map((limit) => limit.period),
    now,
    true,
  );
  const { leased } = await otherLeases(trx, 'key', key.budgetId, '', now);
  for (const limit of limits) {
    const { spend, reserved } = committed.get(limit.period)!;
    const held = new Money(spend).plus(reserved).plus(leased);
    if (held.plus(amountUsd).gt(limit.amountUsd)) {
      return { scope: 'key', period: limit.period, capUsd: limit.amountUsd, spendUsd: formatMoney(held), resetsAt: periodEnd(limit.period, now) };
    }
  }
  return undefined;
}
