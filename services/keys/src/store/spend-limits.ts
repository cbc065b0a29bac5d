import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';
import type { SpendLimitInput } from '../budgets.js';
import type { Period } from '../periods.js';

// The limits of periodic budgets (migrations/006_keys_ii.ts): a key's day, week and total (its
// month is api_keys.monthly_spend_cap_usd), a workspace's four. The subject is a key id or a
// workspace id (their prefixes never collide).

export interface SpendLimitRow {
  period: Period;
  amount_usd: string;
}

/** The limits of a subject as stored (a key's rows never hold `month`). */
export async function findSpendLimits(db: Db, subject: string): Promise<SpendLimitRow[]> {
  return db('spend_limits').where({ subject }).select('period', db.raw('amount_usd::text AS amount_usd'));
}

/** Replaces the limits of `subject` with `limits` (only the periods given; `month` included for a workspace). */
export async function replaceSpendLimits(trx: Knex.Transaction, subject: string, limits: SpendLimitInput[]): Promise<void> {
  await trx('spend_limits').where({ subject }).delete();
  if (limits.length === 0) return;
  await trx('spend_limits').insert(limits.map((limit) => ({ subject, period: limit.period, amount_usd: limit.amountUsd })));
}
