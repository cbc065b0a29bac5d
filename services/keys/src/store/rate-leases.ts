import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// Rate-limit leases (migrations/007_budgets.ts, docs/money-path.md#rate-limit-leases): requests
// and tokens of a budget's UTC minute, or its concurrency slots. Decided in rate-leases.ts under
// the budget's lock (lockKeyBudget). Every time is the caller's clock.

export type RateDimension = 'requests' | 'tokens' | 'concurrency';

/** A lease that still holds at `now` (and, for requests and tokens, is of the window given). */
export async function findLiveRateLease(
  trx: Knex.Transaction,
  lease: { id: string; budgetId: string; dimension: RateDimension; windowStart: Date | null; now: Date },
): Promise<{ id: string; granted: string } | undefined> {
  const { rows } = await trx.raw<{ rows: Array<{ id: string; granted: string }> }>(
    `SELECT id, granted::text FROM rate_leases
      WHERE id = ? AND budget_id = ? AND dimension = ? AND window_start IS NOT DISTINCT FROM ? AND expires_at > ?`,
    [lease.id, lease.budgetId, lease.dimension, lease.windowStart, lease.now],
  );
  return rows[0];
}

/** What the other leases of the budget hold in the window (or, for concurrency, at `now`), and how many hold any. */
export async function otherRateLeases(
  trx: Knex.Transaction,
  of: { budgetId: string; dimension: RateDimension; windowStart: Date | null; now: Date; exceptLeaseId: string },
): Promise<{ held: number; leases: number }> {
  const { rows } = await trx.raw<{ rows: Array<{ held: string; leases: string }> }>(
    `SELECT COALESCE(sum(granted), 0)::text AS held, count(*) FILTER (WHERE granted > 0) AS leases FROM rate_leases
      WHERE budget_id = ? AND dimension = ? AND window_start IS NOT DISTINCT FROM ? AND expires_at > ? AND id <> ?`,
    [of.budgetId, of.dimension, of.windowStart, of.now, of.exceptLeaseId],
  );
  return { held: Number(rows[0].held), leases: Number(rows[0].leases) };
}

export async function insertRateLease(
  trx: Knex.Transaction,
  lease: { id: string; budgetId: string; dimension: RateDimension; windowStart: Date | null; holder: string; granted: number; holdsUntil: Date },
): Promise<void> {
  await trx('rate_leases').insert({
    id: lease.id,
    budget_id: lease.budgetId,
    dimension: lease.dimension,
    window_start: lease.windowStart,
    holder: lease.holder,
    granted: lease.granted,
    expires_at: lease.holdsUntil,
  });
}

export async function renewRateLease(trx: Knex.Transaction, lease: { id: string; holder: string; granted: number; holdsUntil: Date }): Promise<void> {
  await trx('rate_leases')
    .where({ id: lease.id })
    .update({ holder: lease.holder, granted: lease.granted, expires_at: lease.holdsUntil, updated_at: trx.fn.now() });
}

/** Keeps what a lease used (never more than it was granted): the rest returns at once. Needs no lock: it only lowers a hold. */
export async function releaseRateLease(db: Db, leaseId: string, used: number, now: Date): Promise<boolean> {
  const updated = await db.raw<{ rowCount: number }>('UPDATE rate_leases SET granted = LEAST(granted, ?), updated_at = now() WHERE id = ? AND expires_at > ?', [
    used,
    leaseId,
    now,
  ]);
  return updated.rowCount === 1;
}
